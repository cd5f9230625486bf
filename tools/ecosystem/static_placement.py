"""Gemini's static placement: ColossalAI's own StaticPlacementPolicy against the plan.

ColossalAI 0.5.0 decides which chunks' fp32 optimizer states go to the host in
StaticPlacementPolicy.setup_grads_device (zero/gemini/placement_policy.py).
GeminiDDP cannot be built on a CPU (it needs accelerator streams), so this runs
that method itself on the plan's chunks: one stand-in chunk per planned chunk,
with its capacity and as many parameters as the plan packed in it (the packing
is checked against ColossalAI's search by check.py's Gemini entries). The
accelerator's device is named "cuda" so that the device and the host differ
on a CPU machine. The count it sends must equal the plan's
optimizer_chunks_on_host for every fraction.

Usage: static_placement.py TESSERA
"""
import json
import subprocess
import sys

import torch
import colossalai.zero.gemini.placement_policy as placement

# gpt2-medium on 8 ranks: 7 chunks of 292 tensors, the first wte's own.
FRACTIONS = [0.0, 0.001, 0.005, 0.01, 0.02, 0.025, 0.25, 1.0]


class Device:
    def get_current_device(self):
        return torch.device("cuda")


class Chunk:
    def __init__(self, index, elements):
        self.index, self.chunk_mem, self.keep_gathered = index, 2 * elements, False
        self.tensors = []

    def get_tensors(self):
        return self.tensors


class Manager:
    def __init__(self, owner):
        self.owner = owner

    def get_chunk(self, tensor):
        return self.owner[tensor]


def colossalai_count(gemini, fraction):
    capacities = [gemini["chunk_size"]] * gemini["num_chunks"]
    for own in gemini["own_chunks"]:
        capacities[own["chunk"]] = own["elements"]
    chunks = [Chunk(i, c) for i, c in enumerate(capacities)]
    owner = {}
    for chunk, count in zip(chunks, gemini["chunk_tensors"]):
        for _ in range(count):
            tensor = torch.empty(0)
            chunk.tensors.append(tensor)
            owner[tensor] = chunk
    policy = placement.StaticPlacementPolicy(Manager(owner), offload_optim_frac=fraction)
    devices = {}
    policy.setup_grads_device(list(owner), devices)
    return len({owner[t].index for t, d in devices.items() if d.type == "cpu"})


def main(tessera):
    placement.get_accelerator = lambda: Device()
    failed = False
    for fraction in FRACTIONS:
        estimate = subprocess.run([tessera, "estimate", "--model", "gpt2-medium", "--plugin", "gemini", "--dp", "8", "--placement", "static",
                                   "--offload-optim-frac", str(fraction), "--format", "json"], check=True, capture_output=True, text=True)
        gemini = json.loads(estimate.stdout)["gemini"]
        sent, planned = colossalai_count(gemini, fraction), gemini["optimizer_chunks_on_host"]
        ok = sent == planned
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'}  gemini static offload_optim_frac {fraction}: ColossalAI sends {sent} of "
              f"{gemini['num_chunks']} chunks' optimizer states, the plan {planned}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
