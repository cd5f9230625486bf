"""DeepSpeed ZeRO-3's offload buffers against the planner's host figures, on CPU ranks.

    python deepspeed_offload.py TESSERA WORK              (the check: plans, exports, launches, compares)
    torchrun --nproc_per_node 2 deepspeed_offload.py --rank-probe JOBS.json   (what the check launches)

For each case `tessera plan --runtime deepspeed` plans ZeRO-3 for tiny-llama
on 2 ranks, the plan with the optimizer (and the parameters) offloaded is
taken, its sub_group_size set in the file, and `tessera export --to deepspeed`
writes the config. DeepSpeed then takes one
step with it and each rank reports the buffers ZeRO-3 made for the offload
(runtime/zero/stage3.py): the flat 16-bit gradient partitions, the fp32
gradients per sub-group, the fp32 partitions, CPU Adam's moments and, with
offload_param, the 16-bit partitions' flat buffer. Each is compared, in bytes,
with `tessera estimate` for the same settings under --pin-memory false: on a
CPU nothing is pinned, so the exact sizes are what both sides hold. The one
exception is offload_param's flat buffer, which DeepSpeed pins whatever
pin_memory says; on a GPU machine it would be held at the pinned allocator's
next power of two, as the planner counts it, so that is what is compared.
The gradient buffers are compared that way too, against --pin-memory true,
which checks the sub-groups they are split into.
Exit 0: every figure equal; 1: one differs.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SEQ = 64
CASES = [  # (name, extra estimate flags, sub_group_size)
    ("optimizer offloaded", [], 1000000000),
    ("optimizer offloaded, sub-groups of 30,000", [], 30000),
    ("optimizer and parameters offloaded", ["--offload-param"], 1000000000),
]


def run(cmd, **kwargs):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs).stdout


def planned_host_bytes(tessera, flags, sub_group_size):
    """{category: host bytes} of rank 0 as the planner counts them unpinned, and its gradients pinned."""
    def host(pin):
        estimate = json.loads(run([tessera, "estimate", "--model", "tiny-llama", "--plugin", "low_level_zero", "--runtime", "deepspeed",
                                   "--dp", "2", "--precision", "bf16", "--micro-batch", "1", "--seq", str(SEQ), "--cpu-offload",
                                   "--pin-memory", pin, "--sub-group-size", str(sub_group_size), *flags, "--format", "json"]))
        return {name: c["host_bytes"] for name, c in estimate["ranks"][0]["categories"].items() if c["host_bytes"]}
    planned = host("false")
    planned["gradients pinned"] = host("true")["gradients"]
    return planned


def exported_config(tessera, work, name, flags, sub_group_size):
    """ds_config.json for the case: the offloading plan of `tessera plan --runtime deepspeed`, exported."""
    directory = os.path.join(work, "".join(c if c.isalnum() else "-" for c in name))
    os.makedirs(directory)
    plan_path = os.path.join(directory, "plan.json")
    run([tessera, "plan", "--runtime", "deepspeed", "--plugin", "low_level_zero", "--model", "tiny-llama", "--gpus", "2", "--gpu", "h100-80g", "--global-batch", "2",
         "--seq", str(SEQ), "--precision", "bf16", "--recompute", "none", "--pin-memory", "false", "--top", "20", "-o", plan_path])
    with open(plan_path) as f:
        document = json.load(f)
    plan = next(p for p in document["plans"] if p["settings"]["cpu_offload"] and p["settings"]["offload_param"] == ("--offload-param" in flags))
    plan["settings"]["sub_group_size"] = sub_group_size  # not searched: set in the file, as a user would edit it
    document["plans"] = [plan]
    with open(plan_path, "w") as f:
        json.dump(document, f)
    config_path = os.path.join(directory, "ds_config.json")
    run([tessera, "export", plan_path, "--plan", "1", "--to", "deepspeed", "-o", config_path])
    return config_path, directory


def rank_probe(jobs_path):
    """On each rank: one step of each job's config; the offload buffers' bytes to FACTS/rank<R>.json."""
    import deepspeed
    import torch
    import torch.distributed as dist
    from transformers import AutoConfig, AutoModelForCausalLM

    with open(jobs_path) as f:
        jobs = json.load(f)
    for job in jobs:
        with open(job["ds_config"]) as f:
            ds_config = json.load(f)
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(os.path.join(ROOT, "models", "tiny-llama.json")))
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
        ids = torch.randint(0, model.config.vocab_size, (1, SEQ), generator=torch.Generator().manual_seed(dist.get_rank()))
        engine.backward(engine(input_ids=ids, labels=ids).loss)
        engine.step()
        z = engine.optimizer
        nbytes = lambda t: t.numel() * t.element_size()
        pinned = lambda t: 1 << (nbytes(t) - 1).bit_length()  # what a GPU machine's pinned allocator would hold
        moments = sum(nbytes(v) for state in z.optimizer.state.values() for k, v in state.items() if k in ("exp_avg", "exp_avg_sq"))
        facts = {
            "gradients": nbytes(z.grad_partitions_flat_buffer) + sum(nbytes(g.grad) for g in z.fp32_partitioned_groups_flat),
            "gradients pinned": pinned(z.grad_partitions_flat_buffer) + sum(pinned(g.grad) for g in z.fp32_partitioned_groups_flat),
            "master_weights": sum(nbytes(g) for g in z.fp32_partitioned_groups_flat),
            "optimizer_states": moments,
            "sub_groups": len(z.fp32_partitioned_groups_flat),
        }
        if ds_config["zero_optimization"].get("offload_param"):  # one buffer per parameter group, pinned (on a GPU machine)
            facts["parameters"] = sum(pinned(t) for t in z.param_groups_fp16_flat_cpu_memory)
        with open(os.path.join(job["facts"], f"rank{dist.get_rank()}.json"), "w") as f:
            json.dump(facts, f)
        dist.barrier()


def main():
    if sys.argv[1] == "--rank-probe":
        rank_probe(sys.argv[2])
        return 0
    tessera, work = sys.argv[1], sys.argv[2]
    jobs, expected = [], []
    for name, flags, sub_group_size in CASES:
        config, directory = exported_config(tessera, work, name, flags, sub_group_size)
        jobs.append({"ds_config": config, "facts": directory})
        expected.append((name, planned_host_bytes(tessera, flags, sub_group_size)))
    jobs_path = os.path.join(work, "offload-jobs.json")
    with open(jobs_path, "w") as f:
        json.dump(jobs, f)
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    log = os.path.join(work, "offload.log")
    with open(log, "w") as out:
        rc = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", os.path.abspath(__file__), "--rank-probe", jobs_path],
                            stdout=out, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        with open(log) as f:
            print("FAIL deepspeed offload buffers: torchrun exit", rc, "\n  " + "\n  ".join(f.read().splitlines()[-8:]))
        return 1
    status = 0
    for job, (name, planned) in zip(jobs, expected):
        with open(os.path.join(job["facts"], "rank0.json")) as f:
            measured = json.load(f)
        sub_groups = measured.pop("sub_groups")
        same = all(measured.get(k, 0) == v for k, v in planned.items()) and set(measured) <= set(planned)
        status |= 0 if same else 1
        rows = ", ".join(f"{k} {measured.get(k, 0):,} (planned {planned.get(k, 0):,})" for k in sorted(set(planned) | set(measured)))
        print(f"{'PASS' if same else 'FAIL'} deepspeed zero 3, {name} ({sub_groups} sub-groups): host bytes of rank 0: {rows}")
    return status


if __name__ == "__main__":
    sys.exit(main())
