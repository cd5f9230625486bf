#!/usr/bin/env python3
"""PyTorch's numbers for the GPT-2 runs tools/gpu-check compares Tessera with.

Hugging Face GPT2LMHeadModel, fp32 weights, bf16 autocast, fused AdamW, SDPA
attention, no dropout (Tessera's engine has none), sequence 1024, random
tokens. For each model (GPT-2 124M and 350M) it finds the largest micro-batch
that fits in eager mode (doubling, then the step between), then times that
micro-batch eagerly and under torch.compile, and reads the CUDA caching
allocator's peak. Writes one JSON object; tools/gpu-check puts it in
data/measurements/<date>-<gpu>.json under "pytorch".

MFU counts 6·N + 12·L·h·s FLOPs per token (PaLM, Chowdhery et al. 2022,
appendix B; N without the position embeddings, as nanoGPT's estimate_mfu does)
against the GPU's dense bf16 peak given by --peak-tflops.
"""
import argparse
import json
import sys
import time

from torch_on_gpu import torch_on_gpu

MODELS = {
    "gpt2-124m": dict(n_embd=768, n_layer=12, n_head=12),
    "gpt2-350m": dict(n_embd=1024, n_layer=24, n_head=16),
}
MICRO_BATCHES = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128]


def build(torch, transformers, shape, seq):
    config = transformers.GPT2Config(
        vocab_size=50257, n_positions=seq, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        attn_implementation="sdpa", **shape)
    model = transformers.GPT2LMHeadModel(config).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    return model, optimizer


def make_step(torch, model, optimizer):
    def step(tokens):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss
    return step


def fits(torch, step, optimizer, tokens):
    try:
        step(tokens)
        torch.cuda.synchronize()
        return True
    except torch.cuda.OutOfMemoryError:
        optimizer.zero_grad(set_to_none=True)  # a backward that ran out leaves partial gradients
        return False


def time_steps(torch, step, tokens, warmup, steps):
    for _ in range(warmup):
        step(tokens)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step(tokens)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / steps
    return seconds, loss.item(), torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()


def measure(torch, transformers, name, shape, seq, peak_tflops, steps):
    model, optimizer = build(torch, transformers, shape, seq)
    parameters = sum(p.numel() for p in model.parameters())
    position_embeddings = model.transformer.wpe.weight.numel()
    flops_per_token = 6 * (parameters - position_embeddings) + 12 * shape["n_layer"] * shape["n_embd"] * seq
    eager = make_step(torch, model, optimizer)

    largest = None
    for micro_batch in MICRO_BATCHES:
        tokens = torch.randint(0, 50257, (micro_batch, seq), device="cuda")
        if not fits(torch, eager, optimizer, tokens):
            break
        largest = micro_batch
    torch.cuda.empty_cache()
    result = {"parameters": parameters, "sequence": seq, "flops_per_token": flops_per_token,
              "largest_micro_batch_eager": largest,
              "micro_batches_tried": MICRO_BATCHES}
    if largest is None:
        return result
    tokens = torch.randint(0, 50257, (largest, seq), device="cuda")
    # The states the step keeps between steps: fp32 weights and AdamW's two moments.
    result["model_state_bytes"] = torch.cuda.memory_allocated()
    for mode, step in (("eager", eager), ("compile", make_step(torch, torch.compile(model), optimizer))):
        try:
            seconds, loss, peak, reserved = time_steps(torch, step, tokens, warmup=3, steps=steps)
        except Exception as error:  # compile can fail on a new image; record why, keep eager's row
            result[mode] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}
            continue
        tokens_per_second = largest * seq / seconds
        result[mode] = {
            "micro_batch": largest, "step_seconds": seconds, "tokens_per_second": tokens_per_second,
            "mfu": tokens_per_second * flops_per_token / (peak_tflops * 1e12),
            "peak_allocated_bytes": peak, "peak_reserved_bytes": reserved, "final_loss": loss,
        }
        print(f"{name} {mode}: micro-batch {largest}, {seconds * 1e3:.1f} ms/step, "
              f"{tokens_per_second:,.0f} tokens/s, MFU {result[mode]['mfu']:.1%}, "
              f"peak {peak / 2**30:.2f} GiB allocated", flush=True)
    del model, optimizer
    torch.cuda.empty_cache()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--peak-tflops", type=float, default=989.4,
                        help="the GPU's dense bf16 peak (H100 SXM: 989.4, NVIDIA's datasheet)")
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    found = torch_on_gpu("pytorch baseline")
    if found is None:
        return 77
    torch, transformers = found
    report = {"torch": torch.__version__, "transformers": transformers.__version__,
              "peak_tflops": args.peak_tflops, "models": {}}
    for name in args.models.split(","):
        if name not in MODELS:
            print(f"--models: unknown model {name!r}; known: {', '.join(MODELS)}", file=sys.stderr)
            return 2
        report["models"][name] = measure(torch, transformers, name, MODELS[name], args.seq, args.peak_tflops, args.steps)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
