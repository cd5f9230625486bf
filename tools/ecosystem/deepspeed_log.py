"""`tessera compare` reads what DeepSpeed itself prints.

    python deepspeed_log.py TESSERA WORK

`tessera plan --runtime deepspeed` plans ZeRO-3 for tiny-llama on 2 ranks,
`tessera export --to deepspeed` writes its config (steps_per_print set to 1
here, so that a few steps print; the export's 10 suits a real run), and
run_deepspeed.py trains 6 steps with it under torchrun on CPU ranks, its
output kept as the run's log. `tessera compare plan.json LOG --format json`
must then read DeepSpeed's own throughput lines (utils/timer.py,
ThroughputTimer, on rank 0 from the third step): exit 0, the DeepSpeed
runtime, the logged steps after the first, and rank 0's peak. The figures of a
CPU run are not the plan's GPU's; only the reading is checked.
Exit 0: read as described; 1: not.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SEQ = 64
STEPS = 6


def run(cmd, **kwargs):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs).stdout


def main():
    tessera, work = sys.argv[1], sys.argv[2]
    plan = os.path.join(work, "plan.json")
    run([tessera, "plan", "--runtime", "deepspeed", "--plugin", "low_level_zero", "--model", "tiny-llama", "--gpus", "2", "--gpu", "h100-80g", "--global-batch", "2",
         "--seq", str(SEQ), "--precision", "bf16", "--recompute", "none", "--top", "1", "-o", plan])
    config = os.path.join(work, "ds_config.json")
    run([tessera, "export", plan, "--to", "deepspeed", "-o", config])
    with open(config) as f:
        ds_config = json.load(f)
    ds_config["steps_per_print"] = 1
    with open(config, "w") as f:
        json.dump(ds_config, f)
    facts = os.path.join(work, "facts")
    os.makedirs(facts)
    model_dir = os.path.join(work, "model")  # run_deepspeed.py reads the config.json of a directory, as transformers does
    os.makedirs(model_dir)
    with open(os.path.join(ROOT, "models", "tiny-llama.json")) as src, open(os.path.join(model_dir, "config.json"), "w") as dst:
        dst.write(src.read())
    jobs = os.path.join(work, "jobs.json")
    with open(jobs, "w") as f:
        json.dump([{"ds_config": config, "model_config": os.path.join(model_dir, "config.json"), "steps": STEPS, "seq_len": SEQ, "facts": facts}], f)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    launch = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", os.path.join(HERE, "run_deepspeed.py"), jobs],
                            capture_output=True, text=True, env=env)
    log = os.path.join(work, "deepspeed.log")
    with open(log, "w") as f:
        f.write(launch.stdout + launch.stderr)
    with open(os.path.join(facts, "rank0.json")) as f:
        rank0 = json.load(f)
    if launch.returncode != 0 or "error" in rank0:
        print(f"FAIL deepspeed log: the run failed: {rank0.get('error', launch.returncode)}")
        return 1
    compared = subprocess.run([tessera, "compare", plan, log, "--format", "json"], capture_output=True, text=True)
    if compared.returncode != 0:
        print(f"FAIL deepspeed log: tessera compare refused DeepSpeed's output: {compared.stderr.strip()}")
        return 1
    doc = json.loads(compared.stdout)
    ranks = [r["rank"] for r in doc["ranks"]]
    ok = doc["runtime"] == "DeepSpeed" and doc["step_time"]["logged_steps"] >= 1 and ranks == [0] and doc["ranks"][0]["measured_max_allocated_bytes"] >= 0
    print(f"{'PASS' if ok else 'FAIL'} deepspeed log: tessera compare read {doc['step_time']['logged_steps']} logged steps after the first "
          f"(median {doc['step_time']['measured_s']:.3f} s) and rank {ranks} memory from DeepSpeed {ds_version()}'s own output")
    return 0 if ok else 1


def ds_version():
    from importlib.metadata import version
    return version("deepspeed")


if __name__ == "__main__":
    sys.exit(main())
