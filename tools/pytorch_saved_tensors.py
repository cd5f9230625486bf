#!/usr/bin/env python3
"""Which tensors a Hugging Face model's forward keeps for backward on a GPU,
tensor by tensor, read from autograd itself (torch.autograd.graph.
saved_tensors_hooks sees every tensor an op saves): the measurement the
planner's profile for Hugging Face models run eagerly is built from (issue 11).

For GPT-2 and a Llama-layout model, bf16 autocast (fp32 weights, as the
Hugging Face Trainer runs it), bf16 weights without autocast (as ColossalAI,
DeepSpeed and FSDP's MixedPrecision run it) and fp32, SDPA and eager
attention, 1 and 2 blocks (the difference is one block's share), it records
each saved tensor once per storage: the module that was running, its shape,
dtype and bytes, and whether it is a parameter or an autocast copy of one.
Dropout is 0. Writes one JSON object.
"""
import argparse
import json
import sys

from torch_on_gpu import torch_on_gpu


def configs(transformers):
    gpt2 = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_head=12, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    llama = dict(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_attention_heads=8, num_key_value_heads=4,
                 max_position_embeddings=1024, rms_norm_eps=1e-5, tie_word_embeddings=False)
    return {
        "gpt2": lambda layers, attention: transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=layers, attn_implementation=attention, **gpt2)),
        "llama": lambda layers, attention: transformers.LlamaForCausalLM(
            transformers.LlamaConfig(num_hidden_layers=layers, attn_implementation=attention, **llama)),
    }


def probe(torch, build, layers, attention, precision, micro_batch, seq):
    model = build(layers, attention).cuda()
    if precision == "bf16-weights":  # bf16 parameters, no autocast: how ColossalAI, DeepSpeed and FSDP's MixedPrecision run a model
        model = model.to(torch.bfloat16)
    implementation = getattr(model.config, "_attn_implementation", None)
    parameters = {p.data_ptr(): name for name, p in model.named_parameters()}
    parameter_shapes = {tuple(p.shape) for p in model.parameters()}
    running = ["(top)"]

    def enter(module, _inputs):
        running.append(module._probe_name)

    def leave(module, _inputs, _output):
        running.pop()

    for name, module in model.named_modules():
        module._probe_name = name or "(model)"
        module.register_forward_pre_hook(enter)
        module.register_forward_hook(leave)

    saved = {}

    def pack(t):
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in saved:
            saved[key] = {
                "module": running[-1], "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                "bytes": storage.nbytes(), "parameter": parameters.get(t.data_ptr()),
                "weight_copy": t.data_ptr() not in parameters and tuple(t.shape) in parameter_shapes and t.dim() >= 2,
            }
        return t

    vocab = model.config.vocab_size
    tokens = torch.randint(0, vocab, (micro_batch, seq), device="cuda")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        loss = model(input_ids=tokens, labels=tokens).loss
    torch.cuda.synchronize()
    kept = torch.cuda.memory_allocated() - before
    loss.backward()
    tensors = list(saved.values())
    del model, loss, tokens, saved
    torch.cuda.empty_cache()
    return {"layers": layers, "attention": attention, "attention_used": implementation, "precision": precision, "micro_batch": micro_batch, "seq": seq,
            "kept_by_forward_bytes": kept, "saved": tensors}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    # b · s must differ from every weight's dimensions, so that no activation
    # has a weight's shape; two lengths separate the s² terms from the per-token ones.
    parser.add_argument("--micro-batch", type=int, default=3)
    parser.add_argument("--seqs", default="160,320")
    args = parser.parse_args()
    found = torch_on_gpu("saved-tensor probe")
    if found is None:
        return 77
    torch, transformers = found
    rows = {}
    for family, build in configs(transformers).items():
        for precision in ("bf16", "bf16-weights", "fp32"):
            for attention in ("sdpa", "eager"):
                for layers, seq in [(layers, int(seq)) for seq in args.seqs.split(",") for layers in (1, 2)]:
                    row = probe(torch, build, layers, attention, precision, args.micro_batch, seq)
                    rows.setdefault(family, []).append(row)
                    total = sum(t["bytes"] for t in row["saved"] if t["parameter"] is None)
                    print(f"{family} {precision} {attention:5} seq {seq} layers {layers}: {len(row['saved'])} saved storages, "
                          f"{total / 2**20:.2f} MiB besides parameters; allocated by forward {row['kept_by_forward_bytes'] / 2**20:.2f} MiB",
                          flush=True)
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__, "gpu": torch.cuda.get_device_name(),
                   "micro_batch": args.micro_batch, "models": rows}, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
