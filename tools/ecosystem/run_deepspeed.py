"""Trains a few steps with configs written by `tessera export --to deepspeed`, on this CPU rank.

    torchrun --nproc_per_node N run_deepspeed.py JOBS.json

JOBS.json lists {"ds_config", "model_config" (a config.json), "steps", "seq_len",
"facts" (a directory)}; they run one after the other in this process. Each
rank writes FACTS_DIR/rank<R>.json: the engine's ZeRO stage, steps and dtype,
or the error that stopped it.

The model is built from the plan's config.json (random weights) and handed to
deepspeed.initialize with the exported config. On a CPU the one change is the
optimizer's kernel: DeepSpeed builds FusedAdam, a CUDA op, for "Adam"/"AdamW"
unless the params say torch_adam (deepspeed/runtime/engine.py,
_configure_basic_optimizer), so torch_adam is set; with offload_optimizer it
builds its own DeepSpeedCPUAdam, as on a GPU machine.
"""
import json
import math
import os
import sys

import deepspeed
import torch
import torch.distributed as dist
from transformers import AutoConfig, AutoModelForCausalLM


def train(job):
    with open(job["ds_config"]) as f:
        ds_config = json.load(f)
    zero = ds_config.get("zero_optimization", {})
    if "offload_optimizer" not in zero and ds_config["optimizer"]["type"] in ("Adam", "AdamW"):
        ds_config["optimizer"]["params"]["torch_adam"] = True
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(os.path.dirname(job["model_config"])))
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
    micro = ds_config["train_micro_batch_size_per_gpu"]
    losses = []
    generator = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(job["steps"] * engine.gradient_accumulation_steps()):
        ids = torch.randint(0, model.config.vocab_size, (micro, job["seq_len"]), generator=generator)
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    return {
        "rank": dist.get_rank(),
        "zero_stage": engine.zero_optimization_stage(),
        "optimizer_steps": engine.global_steps,
        "micro_steps": engine.micro_steps,
        "dtype": str(next(engine.module.parameters()).dtype),
        "losses_finite": all(math.isfinite(x) for x in losses),
    }


def main():
    with open(sys.argv[1]) as f:
        jobs = json.load(f)
    for job in jobs:
        try:
            facts = train(job)
        except Exception as e:  # recorded for this config; the next one runs
            facts = {"rank": int(os.environ["RANK"]), "error": f"{type(e).__name__}: {e}"[:400]}
        with open(os.path.join(job["facts"], f"rank{facts['rank']}.json"), "w") as f:
            json.dump(facts, f)
        if dist.is_initialized():
            dist.barrier()


if __name__ == "__main__":
    main()
