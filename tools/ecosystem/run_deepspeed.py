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

fp16 needs a CPU with fp16 arithmetic: DeepSpeed's CPU accelerator asks oneDNN
(`torch.ops.mkldnn._is_mkldnn_fp16_supported()`, true with AVX512-FP16 or
AMX-FP16; deepspeed/accelerator/cpu_accelerator.py, is_fp16_supported) and
deepspeed.initialize refuses fp16 without it (runtime/engine.py,
_do_sanity_check). On such a CPU the exported `fp16` section is still checked
against DeepSpeed's own schema (DeepSpeedFP16Config forbids unknown keys), then
the same config trains with that section as `bf16`, so that everything else in
it (ZeRO stage, offload, batch sizes) runs; the facts say so.
"""
import json
import math
import os
import sys

import deepspeed
import torch
import torch.distributed as dist
from deepspeed.accelerator import get_accelerator
from deepspeed.runtime.precision_config import DeepSpeedFP16Config
from transformers import AutoConfig, AutoModelForCausalLM


def fp16_as_bf16_here(ds_config):
    """Whether this CPU cannot run the config's fp16; if so, its fp16 section is validated and swapped for bf16."""
    fp16 = ds_config.get("fp16", {})
    if not fp16.get("enabled") or get_accelerator().is_fp16_supported():
        return False
    DeepSpeedFP16Config(**fp16)  # raises on a key or value DeepSpeed would refuse
    del ds_config["fp16"]
    ds_config["bf16"] = {"enabled": True}
    return True


def train(job):
    with open(job["ds_config"]) as f:
        ds_config = json.load(f)
    fp16_as_bf16 = fp16_as_bf16_here(ds_config)
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
        "fp16_as_bf16": fp16_as_bf16,
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
