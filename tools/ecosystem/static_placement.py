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

The parameters' fractions are decided later, in evict_tensors, from two
budgets setup_grads_device sets: shard_param_frac's keep_gathered_chunk_mem
must equal the plan's kept_gathered_elements (in 2-byte elements), and
offload_param_frac's keep_cuda_chunk_mem must move, of the chunks evicted one
at a time as forward does, exactly the plan's parameter_chunks_on_host.

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
        self.moved = []

    def get_chunk(self, tensor):
        return self.owner[tensor]

    def release_chunk(self, chunk):
        pass

    def move_chunk(self, chunk, device):
        self.moved.append(chunk.index)


def colossalai_policy(gemini, **fractions):
    """ColossalAI's StaticPlacementPolicy after setup_grads_device on the plan's chunks, and its chunks."""
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
    policy = placement.StaticPlacementPolicy(Manager(owner), **fractions)
    devices = {}
    policy.setup_grads_device(list(owner), devices)
    return policy, chunks, owner, devices


def colossalai_count(gemini, fraction):
    _, _, owner, devices = colossalai_policy(gemini, offload_optim_frac=fraction)
    return len({owner[t].index for t, d in devices.items() if d.type == "cpu"})


def estimate(tessera, *options):
    run = subprocess.run([tessera, "estimate", "--model", "gpt2-medium", "--plugin", "gemini", "--dp", "8", "--placement", "static", *options,
                          "--format", "json"], check=True, capture_output=True, text=True)
    return json.loads(run.stdout)["gemini"]


def check_parameter_fractions(tessera):
    failed = False
    for fraction in [1.0, 0.999, 0.99, 0.9, 0.5]:
        gemini = estimate(tessera, "--shard-param-frac", str(fraction))
        policy, _, _, _ = colossalai_policy(gemini, shard_param_frac=fraction)
        ok = abs(policy.keep_gathered_chunk_mem / 2 - gemini["kept_gathered_elements"]) <= 1e-6 * max(1.0, gemini["kept_gathered_elements"])
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'}  gemini static shard_param_frac {fraction}: ColossalAI keeps {policy.keep_gathered_chunk_mem / 2:.0f} "
              f"elements gathered, the plan {gemini['kept_gathered_elements']:.0f}")
    for fraction in [0.5, 0.99, 0.995, 0.997, 0.998, 1.0]:
        gemini = estimate(tessera, "--offload-optim-frac", "1", "--offload-param-frac", str(fraction))
        policy, chunks, _, _ = colossalai_policy(gemini, offload_optim_frac=1.0, offload_param_frac=fraction)
        for chunk in chunks:
            policy.evict_tensors([chunk])
        moved, planned = len(set(policy.chunk_manager.moved)), gemini["parameter_chunks_on_host"]
        ok = moved == planned
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'}  gemini static offload_param_frac {fraction}: ColossalAI moves {moved} of {gemini['num_chunks']} "
              f"parameter chunks to the host, the plan {planned}")
    return failed


def main(tessera):
    placement.get_accelerator = lambda: Device()
    failed = False
    for fraction in FRACTIONS:
        gemini = estimate(tessera, "--offload-optim-frac", str(fraction))
        sent, planned = colossalai_count(gemini, fraction), gemini["optimizer_chunks_on_host"]
        ok = sent == planned
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'}  gemini static offload_optim_frac {fraction}: ColossalAI sends {sent} of "
              f"{gemini['num_chunks']} chunks' optimizer states, the plan {planned}")
    failed |= check_parameter_fractions(tessera)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
