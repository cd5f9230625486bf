#!/usr/bin/env python3
"""Compare Tessera's engine with Hugging Face transformers on one batch.

usage: reference_check.py CHECKPOINT_DIR DUMP.safetensors

CHECKPOINT_DIR is a `tessera train --out` directory (config.json and
model.safetensors with Hugging Face names); DUMP is what tools/reference_dump
wrote for the same checkpoint: the batch, our softmax probabilities, our loss
and our gradients. transformers loads the checkpoint as GPT2LMHeadModel or
LlamaForCausalLM (from the config), computes the same loss in fp32, and the
script checks probabilities, loss and every gradient within 1e-4 relative.
Exit 0 when everything matches, 1 otherwise.
"""
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

TOLERANCE = 1e-4


def relative_error(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return float((ours - theirs).norm() / theirs.norm().clamp_min(1e-12))


def main() -> int:
    checkpoint, dump_path = sys.argv[1], sys.argv[2]
    dump = load_file(dump_path)
    try:  # transformers >= 4.56 names it dtype, older versions torch_dtype
        model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        model = AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.float32, attn_implementation="eager")
    model.train()
    for module in model.modules():  # no dropout: Tessera trains without it
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    tokens = dump["tokens"].long()
    targets = dump["targets"].long()
    logits = model(input_ids=tokens).logits.float()
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    loss.backward()
    failures = []

    def check(name: str, ours: torch.Tensor, theirs: torch.Tensor) -> None:
        error = relative_error(ours, theirs)
        status = "ok" if error <= TOLERANCE else "MISMATCH"
        print(f"{status:8} {name:55} relative error {error:.2e}")
        if error > TOLERANCE:
            failures.append(name)

    check("softmax probabilities", dump["probs"], torch.softmax(logits, dim=-1).detach())
    check("loss", dump["loss"], loss.detach().reshape(1))
    parameters = dict(model.named_parameters())
    for key, ours in dump.items():
        if not key.startswith("grad."):
            continue
        name = key[len("grad."):]
        if name not in parameters:
            failures.append(name)
            print(f"MISSING  {name} is not a parameter of {type(model).__name__}")
            continue
        check("gradient of " + name, ours, parameters[name].grad)
    print(f"{type(model).__name__}: {'all match' if not failures else str(len(failures)) + ' mismatches'} (tolerance {TOLERANCE})")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
