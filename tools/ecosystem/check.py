"""tools/ecosystem-check's matrix: plans made and exported by the real `tessera`
binary, run against the installed ColossalAI, DeepSpeed and transformers on CPU
ranks, each as far as a CPU allows, and compared with what the plan says.

    check.py TESSERA WORK_DIR

Prints one line per entry (PASS/FAIL, what was run, what was compared) and a
summary; exit 0 when every entry passes, 1 otherwise.
"""
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SAFETENSORS_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}  # safetensors' names, torch's
STEPS = 3  # optimizer steps per run: enough to cross accumulation boundaries and a second step


@dataclass
class Entry:
    name: str
    plan: list  # `tessera plan` arguments (--model @layers-N: tiny-gpt2 with N blocks)
    pick: dict = field(default_factory=dict)  # settings the chosen plan must have (the first such plan)
    target: str = "colossalai"  # or "deepspeed"
    mode: str = "steps"  # steps: train STEPS steps; construct: up to booster.boost


def tiny(model, gpus, *extra):
    return ["--model", model, "--gpus", str(gpus), "--global-batch", "8", "--seq", "64", "--top", "60", *extra]


# What runs how far on a CPU (colossalai 0.5.0, deepspeed 0.19.8, torch 2.5.1):
#  - TorchDDPPlugin trains (gloo); fp16 runs the booster's AMP path, which on a CPU casts nothing.
#  - LowLevelZero asserts a CUDA/NPU accelerator (zero/low_level/low_level_optim.py _sanity_checks), Gemini
#    needs accelerator streams (zero/gemini/gemini_ddp.py), FSDP torch.cuda.current_device()
#    (booster/plugin/torch_fsdp_plugin.py configure), HybridParallel's ZeRO and shardformer the same: these
#    run to booster.boost, where their process groups, layers per stage and chunks are compared.
#  - DeepSpeed's ZeRO-1/2/3 trains on CPU ranks, offload included.
MATRIX = [
    Entry("ddp fp16 accumulation", tiny("tiny-gpt2", 2, "--plugin", "torch_ddp", "--precision", "fp16", "--micro-batch", "2"), {"recompute": "none"}),
    Entry("ddp bf16 accumulation", tiny("tiny-llama", 2, "--plugin", "torch_ddp", "--micro-batch", "2"), {"recompute": "none"}),
    Entry("ddp fp32 sgd momentum", tiny("tiny-gpt2", 2, "--plugin", "torch_ddp", "--precision", "fp32", "--optimizer", "sgd_momentum", "--micro-batch", "4"),
          {"recompute": "none"}),
    Entry("ddp bf16 recompute full, 4 ranks", tiny("tiny-gpt2", 4, "--plugin", "torch_ddp", "--micro-batch", "1"), {"recompute": "full"}),
    Entry("fsdp full_shard bf16", tiny("tiny-gpt2", 2, "--plugin", "torch_fsdp", "--micro-batch", "2"), {"sharding_strategy": "full_shard"}, mode="construct"),
    # FSDP's CPU offload needs a CUDA device as FSDP does (construct); its DeepSpeed export (stage 3, parameters and optimizer offloaded) trains.
    Entry("fsdp full_shard + cpu offload bf16", tiny("tiny-gpt2", 2, "--plugin", "torch_fsdp", "--micro-batch", "4"),
          {"sharding_strategy": "full_shard", "cpu_offload": True}, mode="construct"),
    Entry("low_level_zero stage 2 + offload", tiny("tiny-gpt2", 2, "--plugin", "low_level_zero", "--micro-batch", "2"), {"stage": 2, "cpu_offload": True}, mode="construct"),
    Entry("gemini cuda (chunk_config_dict)", tiny("tiny-gpt2", 2, "--plugin", "gemini", "--micro-batch", "2"), {"placement_policy": "cuda"}, mode="construct"),
    Entry("gemini auto bf16", tiny("tiny-gpt2", 2, "--plugin", "gemini", "--micro-batch", "2"), {"placement_policy": "auto"}, mode="construct"),
    Entry("gemini static offload fp16", tiny("tiny-llama", 2, "--plugin", "gemini", "--precision", "fp16", "--micro-batch", "2"), {"placement_policy": "static"}, mode="construct"),
    Entry("gemini gpt2-medium dp 8 (search)", ["--model", "gpt2-medium", "--gpus", "8", "--global-batch", "64", "--seq", "1024", "--plugin", "gemini", "--top", "1"], mode="construct"),
    Entry("gemini llama-2-7b dp 8 (search)", ["--model", "llama-2-7b", "--gpus", "8", "--global-batch", "64", "--seq", "4096", "--plugin", "gemini", "--top", "1"], mode="construct"),
    Entry("hybrid tp 2 x pp 2 x dp 2, 1f1b", tiny("tiny-gpt2", 8, "--plugin", "hybrid_parallel", "--tp", "2", "--pp", "2", "--micro-batch", "1"), {"pp_style": "1f1b"}, mode="construct"),
    Entry("hybrid tp 2 x dp 4, zero 2", tiny("tiny-llama", 8, "--plugin", "hybrid_parallel", "--tp", "2", "--pp", "1", "--zero-stage", "2"), mode="construct"),
    Entry("hybrid pp 4 x dp 2, 5 layers, 2 nodes", ["--model", "@layers-5", "--gpus", "8", "--gpus-per-node", "4", "--global-batch", "8", "--seq", "64", "--top", "60",
                                                  "--plugin", "hybrid_parallel", "--tp", "1", "--pp", "4", "--micro-batch", "1"], {"pp_style": "1f1b"}, mode="construct"),
    Entry("hybrid interleaved pp 2 x 2 chunks, 6 layers", ["--model", "@layers-6", "--gpus", "8", "--global-batch", "8", "--seq", "64", "--top", "60",
                                                          "--plugin", "hybrid_parallel", "--tp", "2", "--pp", "2", "--micro-batch", "1"],
          {"pp_style": "interleaved"}, mode="construct"),
    Entry("hybrid interleaved pp 2 x 2 chunks, Llama with 8 layers, 1 block of each chunk recomputed",
          ["--model", "@llama-layers-8", "--gpus", "8", "--global-batch", "8", "--seq", "64", "--top", "60", "--plugin", "hybrid_parallel",
           "--tp", "2", "--pp", "2", "--micro-batch", "1", "--recompute", "full", "--recompute-num-layers", "1"],
          {"pp_style": "interleaved"}, mode="construct"),
    Entry("deepspeed zero 1 bf16", tiny("tiny-gpt2", 2, "--plugin", "low_level_zero", "--micro-batch", "2"), {"stage": 1, "cpu_offload": False, "recompute": "none"}, "deepspeed"),
    Entry("deepspeed zero 2 bf16", tiny("tiny-llama", 2, "--plugin", "low_level_zero", "--micro-batch", "2"), {"stage": 2, "cpu_offload": False, "recompute": "none"}, "deepspeed"),
    Entry("deepspeed zero 2 fp16 + offload", tiny("tiny-gpt2", 2, "--plugin", "low_level_zero", "--precision", "fp16", "--micro-batch", "2"),
          {"stage": 2, "cpu_offload": True, "recompute": "none"}, "deepspeed"),
    Entry("deepspeed zero 3 (fsdp full_shard) bf16", tiny("tiny-gpt2", 2, "--plugin", "torch_fsdp", "--micro-batch", "2"),
          {"sharding_strategy": "full_shard", "recompute": "none"}, "deepspeed"),
    Entry("deepspeed zero 3 + param/optim offload (fsdp cpu offload)", tiny("tiny-gpt2", 2, "--plugin", "torch_fsdp", "--micro-batch", "4"),
          {"sharding_strategy": "full_shard", "cpu_offload": True, "recompute": "none"}, "deepspeed"),
    Entry("deepspeed zero 3 + param/optim offload (gemini cpu)", tiny("tiny-llama", 2, "--plugin", "gemini", "--micro-batch", "2"),
          {"placement_policy": "cpu", "recompute": "none"}, "deepspeed"),
]


def layers_config(work, argument):
    """tiny-gpt2 (`--model @layers-N`) or tiny-llama (`@llama-layers-N`) with more blocks: splits over stages
    that are not even, where the plan's layers per stage and ColossalAI's (PipelineStageManager.distribute_layers)
    could differ, and Llama pipelines, whose forward ColossalAI checkpoints block by block."""
    base = "tiny-llama" if argument.startswith("@llama-") else "tiny-gpt2"
    layers = int(argument.rsplit("-", 1)[1])
    with open(os.path.join(ROOT, "models", base + ".json")) as f:
        config = json.load(f)
    config["num_hidden_layers" if "num_hidden_layers" in config else "n_layer"] = layers
    config["_comment"] = f"{base} with {layers} layers, for tools/ecosystem-check"
    path = os.path.join(work, f"{base}-{layers}-layers.json")
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
    return path


def run(cmd, log, env=None, timeout=900):
    with open(log, "w") as out:
        return subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode


def tail(log, lines=6):
    with open(log) as f:
        text = [line.rstrip() for line in f if "Warning" not in line and "warn(" not in line]
    return "\n      ".join(text[-lines:])


def pick_plan(plan_file, pick):
    with open(plan_file) as f:
        document = json.load(f)
    for index, plan in enumerate(document["plans"]):
        values = {**plan["settings"], **plan["training"]}
        if all(values.get(k) == v for k, v in pick.items()):
            return index + 1, plan, document
    return None


def planned_groups(layout, rank):
    """The plan's groups of a rank: tp fastest, then dp, then pp (docs/plan-json.md, `layout`)."""
    tp, dp, pp = layout["tp"], layout["dp"], layout["pp"]
    t, d, p = rank % tp, rank // tp % dp, rank // (tp * dp)
    return {
        "tp_group": [i + tp * (d + dp * p) for i in range(tp)],
        "dp_group": [t + tp * (i + dp * p) for i in range(dp)],
        "pp_group": [t + tp * (d + dp * i) for i in range(pp)],
        "stage": p,
    }


def planned_layers_per_stage(plan):
    """Blocks per (virtual) stage from memory.ranks, in ColossalAI's order: model chunk c of stage s is
    virtual stage c * pp + s (rows that merge stages hold as many blocks each)."""
    pp = plan["layout"]["pp"]
    counts = {}
    for row in plan["memory"]["ranks"]:
        first, last = row["pipeline_stages"]
        chunks = row.get("layer_chunks") or ([row["layers"]] if row["layers"] is not None else [])
        for stage in range(first, last + 1):
            for c, (low, high) in enumerate(chunks):
                counts[c * pp + stage] = (high - low + 1) // (last - first + 1)
    return [counts[v] for v in sorted(counts)]


def compare_colossalai(entry, plan, facts):
    """Problems found comparing the ranks' facts with the plan (an empty list: they agree)."""
    problems = []
    settings, layout = plan["settings"], plan["layout"]
    if entry.mode == "steps":
        losses = facts[-1]["losses"]  # the last rank prints them
        if len(losses) != STEPS or not all(math.isfinite(x) for x in losses):
            return [f"the script printed losses {losses} for {STEPS} steps"]
        return []
    for rank, f in enumerate(facts):
        if f["plugin"] == "HybridParallelPlugin":
            expected = planned_groups(layout, rank)
            for key in ("tp_group", "dp_group", "pp_group"):
                if f[key] != expected[key]:
                    problems.append(f"rank {rank} {key} {f[key]}, planned {expected[key]}")
            if layout["pp"] > 1:
                if f["stage"] != expected["stage"]:
                    problems.append(f"rank {rank} stage {f['stage']}, planned {expected['stage']}")
                if f["layers_per_stage"] != planned_layers_per_stage(plan):
                    problems.append(f"layers per stage {f['layers_per_stage']}, planned {planned_layers_per_stage(plan)}")
                # Full recompute of the first K blocks of each (virtual) stage: the count gradient_checkpoint_config gives.
                blocks = plan["training"].get("recompute_num_layers", 0)
                if blocks and f.get("checkpointed_per_stage") != [min(blocks, n) for n in planned_layers_per_stage(plan)]:
                    problems.append(f"checkpointed blocks per stage {f.get('checkpointed_per_stage')}, planned the first {blocks} of "
                                    f"{planned_layers_per_stage(plan)}")
            if f["gradient_checkpointing"] != (plan["training"]["recompute"] == "full"):
                problems.append(f"rank {rank}: gradient checkpointing {f['gradient_checkpointing']}, planned recompute {plan['training']['recompute']}")
        if f["plugin"] == "GeminiPlugin":
            if f["zero_group"] != planned_groups(layout, rank)["dp_group"]:
                problems.append(f"rank {rank} zero group {f['zero_group']}, planned {planned_groups(layout, rank)['dp_group']}")
            chunk = f["chunks"].get(str(layout["dp"]), {})
            if chunk.get("chunk_size") != settings["chunk_size"] or chunk.get("keep_gathered"):
                problems.append(f"rank {rank} chunks {f['chunks']} ({f['chunk_source']}), planned {settings['chunk_size']} sharded over dp {layout['dp']}")
        if f["plugin"] == "TorchFSDPPlugin" and f["wrapped_blocks"] != f["blocks"]:
            problems.append(f"rank {rank}: the auto-wrap policy wraps {f['wrapped_blocks']} modules, the model has {f['blocks']} blocks")
        if f["plugin"] == "TorchFSDPPlugin" and f["offload_params"] != settings.get("cpu_offload", False):
            problems.append(f"rank {rank}: FSDP's CPUOffload(offload_params={f['offload_params']}), planned cpu_offload {settings.get('cpu_offload', False)}")
    return sorted(set(problems))


def describe_facts(entry, plan, facts):
    if entry.target == "deepspeed":
        f = facts[0]
        text = f"ZeRO-{f['zero_stage']} {f['dtype'].replace('torch.', '')}, {f['optimizer_steps']} steps of {f['micro_steps'] // max(f['optimizer_steps'], 1)} micro-steps"
        # run_deepspeed.py: this CPU has no fp16 arithmetic, so the fp16 section was validated, then trained as bf16.
        return text + (" (fp16 section valid; this CPU has no fp16, trained as bf16)" if f.get("fp16_as_bf16") else "")
    if entry.mode == "steps":
        losses = ", ".join(f"{x:.3f}" for x in facts[-1]["losses"])
        return f"{STEPS} steps of {plan['gradient_accumulation_steps']} micro-steps, losses {losses}"
    f = facts[0]
    if f["plugin"] == "HybridParallelPlugin":
        text = f"groups of {len(facts)} ranks as planned"
        return (text + (f", layers per stage {f['layers_per_stage']}" if "layers_per_stage" in f else "")
                + (f", checkpointed {f['checkpointed_per_stage']}" if "checkpointed_per_stage" in f else ""))
    if f["plugin"] == "GeminiPlugin":
        return f"chunk {plan['settings']['chunk_size']:,} elements ({f['chunk_source']}) as planned"
    if f["plugin"] == "TorchFSDPPlugin":
        return f"{f['wrapped_blocks']} blocks wrapped"
    return "plugin constructed"


@dataclass
class Prepared:
    entry: Entry
    index: int = 0  # which plan of the file (1 = best)
    plan: dict = field(default_factory=dict)
    ranks: int = 0
    facts_dir: str = ""
    job: dict = field(default_factory=dict)  # what the runner is given
    failure: str = ""  # why it could not be planned or exported


def prepare(entry, tessera, work):
    """Plans and exports an entry with the real binary; the job its runner takes."""
    slug = "".join(c if c.isalnum() else "-" for c in entry.name)
    directory = os.path.join(work, slug)
    facts_dir = os.path.join(directory, "facts")
    os.makedirs(facts_dir)
    plan_args = [layers_config(work, a) if a.startswith("@") else a for a in entry.plan]
    if run([tessera, "plan", *plan_args, "-o", os.path.join(directory, "plan.json")], os.path.join(directory, "plan.log")) != 0:
        return Prepared(entry, failure="tessera plan failed: " + tail(os.path.join(directory, "plan.log")))
    picked = pick_plan(os.path.join(directory, "plan.json"), entry.pick)
    if picked is None:
        return Prepared(entry, failure=f"no plan in plan.json has {entry.pick}")
    index, plan, document = picked
    output = os.path.join(directory, "train.py" if entry.target == "colossalai" else "ds_config.json")
    export = [tessera, "export", os.path.join(directory, "plan.json"), "--plan", str(index), "--to", entry.target, "-o", output]
    if run(export, os.path.join(directory, "export.log")) != 0:
        return Prepared(entry, failure="tessera export failed: " + tail(os.path.join(directory, "export.log")))
    prepared = Prepared(entry, index, plan, plan["layout"]["world_size"], facts_dir)
    if entry.target == "colossalai":
        with open(output) as f:
            script = f.read().replace("\nSTEPS = 20\n", f"\nSTEPS = {STEPS}\n")
        with open(output, "w") as f:
            f.write(script)
        prepared.job = {"script": output, "facts": facts_dir}
        return prepared
    model_config = os.path.join(directory, "model", "config.json")
    os.makedirs(os.path.dirname(model_config))
    source = document["model"]["source"]
    with open(source if os.path.isfile(source) else os.path.join(ROOT, "models", source + ".json")) as f, open(model_config, "w") as g:
        g.write(f.read())
    prepared.job = {"ds_config": output, "model_config": model_config, "steps": STEPS, "seq_len": document["seq_len"], "facts": facts_dir}
    return prepared


def launch_group(group, venv, work, env):
    """Runs a group's jobs in one torchrun launch; the log's tail when it failed as a whole."""
    first = group[0].entry
    runner = "run_script.py" if first.target == "colossalai" else "run_deepspeed.py"
    name = f"{first.target}-{first.mode}-{group[0].ranks}"
    jobs = os.path.join(work, name + ".json")
    with open(jobs, "w") as f:
        json.dump([p.job for p in group], f)
    args = [first.mode, jobs] if first.target == "colossalai" else [jobs]
    log = os.path.join(work, name + ".log")
    cmd = [os.path.join(venv, "bin", "torchrun"), "--standalone", "--nproc_per_node", str(group[0].ranks), os.path.join(HERE, runner), *args]
    try:
        rc = run(cmd, log, env)
    except subprocess.TimeoutExpired:
        return "timed out: " + tail(log)
    return "" if rc == 0 else f"exit {rc}: " + tail(log)


def evaluate(p, launch_failure):
    """PASS or FAIL and what was compared, from the ranks' facts."""
    if p.failure:
        return False, p.failure
    facts = []
    for rank in range(p.ranks):
        path = os.path.join(p.facts_dir, f"rank{rank}.json")
        if os.path.exists(path):
            with open(path) as f:
                facts.append(json.load(f))
    errors = sorted({f["error"] for f in facts if "error" in f})
    if errors:
        return False, "; ".join(errors)
    if len(facts) != p.ranks:
        return False, f"{len(facts)} of {p.ranks} ranks reported; " + (launch_failure or "")
    if p.entry.target == "deepspeed":
        bad = [f for f in facts if f["optimizer_steps"] != STEPS or not f["losses_finite"]]
        problems = [f"rank {f['rank']}: {f}" for f in bad]
    else:
        problems = compare_colossalai(p.entry, p.plan, facts)
    if problems:
        return False, "; ".join(problems)
    return True, f"plan {p.index}, {p.ranks} ranks: " + describe_facts(p.entry, p.plan, facts)


def check_checkpoints(venv, work, env):
    """`tessera train` checkpoints in transformers: tools/reference-check with this venv (logits, loss and every gradient)."""
    log = os.path.join(work, "reference-check.log")
    rc = run([os.path.join(ROOT, "tools", "reference-check")], log, {**env, "TESSERA_REFERENCE_VENV": venv}, timeout=900)
    with open(log) as f:
        lines = f.read().splitlines()
    summaries = [line for line in lines if line.startswith(("GPT2LMHeadModel", "LlamaForCausalLM"))]
    worst = max((float(line.split("relative error ")[1]) for line in lines if "relative error " in line), default=float("nan"))
    detail = ", ".join(s.split(" (")[0] for s in summaries) + f"; largest relative error {worst:.1e}"
    return rc == 0 and len(summaries) == 2, detail if rc == 0 else f"exit {rc}: " + tail(log)


def check_bf16_checkpoint(tessera, venv, work, env):
    """A bf16 run's checkpoint: transformers loads it with torch_dtype="auto" in the dtype its
    config.json names, which is the dtype of the stored weights (fp32 master weights), and computes
    what Tessera computes on it (tools/reference_dump and reference_check.py, as reference-check runs them)."""
    out, dump, log = os.path.join(work, "bf16-run"), os.path.join(work, "bf16-dump.safetensors"), os.path.join(work, "bf16-run.log")
    build = os.environ.get("TESSERA_BUILD_DIR", os.path.join(ROOT, "build"))
    if run([tessera, "train", "--model", "tiny-llama", "--steps", "2", "--precision", "bf16", "--out", out], log) != 0:
        return False, "tessera train failed: " + tail(log)
    if run([os.path.join(build, "tools", "reference_dump"), out, dump, "2", "32"], log) != 0:
        return False, "reference_dump failed: " + tail(log)
    compared = run([os.path.join(venv, "bin", "python"), os.path.join(ROOT, "tools", "reference_check.py"), out, dump], log, env)
    from safetensors import safe_open  # here, not at the top: only this check needs torch in the driver
    from transformers import AutoModelForCausalLM

    with open(os.path.join(out, "config.json")) as f:
        named = json.load(f).get("torch_dtype")
    with safe_open(os.path.join(out, "model.safetensors"), "pt") as f:
        stored = {SAFETENSORS_DTYPES.get(f.get_slice(k).get_dtype(), "?") for k in f.keys()}
    loaded = {str(p.dtype).replace("torch.", "") for p in AutoModelForCausalLM.from_pretrained(out, torch_dtype="auto").parameters()}
    problems = [] if compared == 0 else ["reference_check: " + tail(log, 2)]
    if named is None or loaded != {named} or stored != {named}:
        problems.append(f"config.json torch_dtype {named}, stored {sorted(stored)}, loaded as {sorted(loaded)}")
    return not problems, "; ".join(problems) or f"torch_dtype {named} as stored and loaded; logits, loss and gradients match"


def main():
    tessera, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    venv = os.path.dirname(os.path.dirname(sys.executable))
    # One thread per rank: the ranks share the machine's cores.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "DS_BUILD_OPS": "0"}
    start = time.monotonic()
    prepared = [prepare(entry, tessera, work) for entry in MATRIX]
    print(f"ecosystem-check: {len(prepared)} plans made and exported in {time.monotonic() - start:.0f} s", flush=True)
    # Entries that run the same way on as many ranks share one launch.
    groups = {}
    for p in prepared:
        if not p.failure:
            groups.setdefault((p.entry.target, p.entry.mode, p.ranks), []).append(p)
    results = []
    for (target, mode, ranks), group in groups.items():
        start = time.monotonic()
        failure = launch_group(group, venv, work, env)
        what = "deepspeed" if target == "deepspeed" else f"colossalai {mode}"
        print(f"-- {what} on {ranks} ranks: {len(group)} entries in one launch, {time.monotonic() - start:.0f} s", flush=True)
        for p in group:
            ok, detail = evaluate(p, failure)
            results.append(ok)
            print(f"{'PASS' if ok else 'FAIL'}  {what:21} {p.entry.name:52} {detail}", flush=True)
    for p in prepared:
        if p.failure:
            results.append(False)
            print(f"FAIL  {p.entry.target:21} {p.entry.name:52} {p.failure}", flush=True)
    start = time.monotonic()
    ok, detail = check_checkpoints(venv, work, env)
    results.append(ok)
    print(f"-- transformers: {time.monotonic() - start:.0f} s", flush=True)
    print(f"{'PASS' if ok else 'FAIL'}  {'transformers':21} {'tessera train checkpoints':52} {detail}", flush=True)
    ok, detail = check_bf16_checkpoint(tessera, venv, work, env)
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'}  {'transformers':21} {'tessera train --precision bf16 checkpoint':52} {detail}", flush=True)
    print(f"ecosystem-check: {sum(results)} of {len(results)} entries pass")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
