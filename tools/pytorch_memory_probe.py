#!/usr/bin/env python3
"""What a Hugging Face GPT-2 training step keeps on a GPU, measured, for the
planner's runtime profiles (issue 11): the bytes held between steps (weights
and AdamW's moments), the bytes a forward leaves for backward (activations and
logits), and the step's peak, read from PyTorch's CUDA caching allocator.

Each row varies one thing the planner's formulas separate: the layer count
(per-layer activations against the embedding and head's), the micro-batch
(per-token bytes against fixed ones), the attention implementation (SDPA
keeps no scores; HF's eager attention keeps the s² probabilities) and the
precision (bf16 autocast against fp32). Dropout is 0, as in Tessera's engine.
Writes one JSON object with a row per configuration.
"""
import argparse
import json
import sys

from torch_on_gpu import torch_on_gpu


def probe(torch, transformers, layers, attention, precision, micro_batch, seq, vocab=50257):
    config = transformers.GPT2Config(
        vocab_size=vocab, n_positions=seq, n_embd=768, n_layer=layers, n_head=12,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation=attention)
    model = transformers.GPT2LMHeadModel(config).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, vocab, (micro_batch, seq), device="cuda")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16")

    def step():
        with autocast:
            loss = model(input_ids=tokens, labels=tokens).loss
        after_forward = torch.cuda.memory_allocated()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return after_forward

    step()  # creates AdamW's moments
    torch.cuda.synchronize()
    states = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    after_forward = step()
    torch.cuda.synchronize()
    row = {
        "layers": layers, "attention": attention, "precision": precision, "micro_batch": micro_batch, "seq": seq,
        "parameters": sum(p.numel() for p in model.parameters()),
        "states_bytes": states,
        "kept_by_forward_bytes": after_forward - states,
        "peak_above_states_bytes": torch.cuda.max_memory_allocated() - states,
    }
    del model, optimizer, tokens
    torch.cuda.empty_cache()
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seq", type=int, default=1024)
    args = parser.parse_args()
    found = torch_on_gpu("pytorch memory probe")
    if found is None:
        return 77
    torch, transformers = found
    rows = []
    for precision in ("bf16", "fp32"):
        for attention in ("sdpa", "eager"):
            for layers in (6, 12):
                for micro_batch in (2, 8):
                    row = probe(torch, transformers, layers, attention, precision, micro_batch, args.seq)
                    rows.append(row)
                    print(f"{precision} {attention:5} layers {layers:2} mb {micro_batch}: states {row['states_bytes'] / 2**20:8.1f} MiB, "
                          f"kept by forward {row['kept_by_forward_bytes'] / 2**20:8.1f} MiB, "
                          f"peak above states {row['peak_above_states_bytes'] / 2**20:8.1f} MiB", flush=True)
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
                   "gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
