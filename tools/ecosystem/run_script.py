"""Runs scripts written by `tessera export --to colossalai` on this CPU rank (under torchrun).

    torchrun --nproc_per_node N run_script.py steps|construct JOBS.json

JOBS.json lists {"script": train.py, "facts": FACTS_DIR}; the scripts run one
after the other in this process, so that the ranks start (import torch,
ColossalAI and transformers) once: colossalai.launch_from_torch only seeds
when the process group exists already. A script that raises is recorded
(FACTS_DIR/rank<R>.json holds its error) and the next one runs.

steps:     the script runs as written; ColossalAI's CPU accelerator hands
           TorchAMPModule a context-manager class instead of a context
           (CpuAccelerator.autocast returns `nullcontext`, colossalai 0.5.0
           accelerator/cpu_accelerator.py), which is mended here so that the
           fp16 booster runs forward at all on a CPU.
construct: for the plugins whose boost needs a GPU (ZeRO, Gemini, hybrid
           parallel, FSDP: CUDA streams, kernels, torch.cuda.current_device()),
           the script runs up to booster.boost and stops there. HybridAdam's
           kernels are CUDA extensions even for its CPU part (extensions/pybind/
           cpu_adam/cpu_adam_x86.py is a _CudaExtension), so a torch.optim.AdamW
           stands in for it: the optimizer never steps here.
Each rank writes FACTS_DIR/rank<R>.json: in construct mode its process groups
as the plugin made them, the pipeline's layers per stage, Gemini's chunk
configuration; in steps mode the losses the script printed (the last rank
prints them).
"""
import contextlib
import io
import json
import os
import re
import runpy
import sys

import torch
import torch.distributed as dist
from colossalai.accelerator.cpu_accelerator import CpuAccelerator

CpuAccelerator.autocast = lambda self, *args, **kwargs: contextlib.nullcontext()


class Constructed(Exception):
    """Raised from booster.boost once the plugin's facts are written."""


def group_ranks(group):
    return dist.get_process_group_ranks(group) if group is not None else [dist.get_rank()]


def gemini_chunks(plugin, model):
    """The chunk configuration GeminiDDP would give this model: the plugin's
    chunk_config_dict, or ColossalAI's own search with the plugin's arguments
    (GeminiDDP.__init__ -> init_chunk_manager -> search_chunk_configuration,
    zero/gemini/gemini_ddp.py and chunk/utils.py), over the zero group."""
    from colossalai.zero.gemini.chunk.search_utils import search_chunk_configuration

    config = plugin.gemini_config
    if config.get("chunk_config_dict"):
        return {"source": "chunk_config_dict", "config": config["chunk_config_dict"]}
    found, _, _ = search_chunk_configuration(
        model,
        search_range_m=config.get("search_range_m") or 32,
        search_interval=config.get("hidden_dim") or 1024,
        min_chunk_size_m=config.get("min_chunk_size_m", 32),
        strict_ddp_flag=config.get("strict_ddp_mode", False),
        process_group=plugin.zero_group,
    )
    return {"source": "search", "config": found}


def plugin_facts(plugin, model):
    name = type(plugin).__name__
    facts = {"plugin": name, "rank": dist.get_rank(), "world_size": dist.get_world_size()}
    if name == "HybridParallelPlugin":
        facts["tp_group"] = group_ranks(plugin.tp_group)
        facts["dp_group"] = group_ranks(plugin.dp_group)
        facts["pp_group"] = group_ranks(plugin.pp_group)
        facts["gradient_checkpointing"] = bool(model.is_gradient_checkpointing)
        if plugin.stage_manager is not None:
            stages = plugin.stage_manager
            facts["stage"] = stages.stage
            facts["layers_per_stage"] = stages.distribute_layers(model.config.num_hidden_layers)
            config = plugin.shard_config.gradient_checkpoint_config
            if config is not None:
                # What the Llama pipeline forward checkpoints of each (virtual) stage, stage + chunk x pp.
                pp, chunks = stages.num_stages, stages.num_model_chunks
                facts["checkpointed_per_stage"] = [
                    config.get_num_ckpt_layers(stage=v % pp, num_stages=pp, num_layers=int(n), model_chunk_id=v // pp, num_model_chunks=chunks)
                    for v, n in enumerate(facts["layers_per_stage"])]
    if name == "GeminiPlugin":
        facts["zero_group"] = group_ranks(plugin.zero_group)
        chunks = gemini_chunks(plugin, model)
        facts["chunks"] = {str(k): v for k, v in chunks["config"].items()}
        facts["chunk_source"] = chunks["source"]
    if name == "TorchFSDPPlugin":
        policy = plugin.fsdp_kwargs["auto_wrap_policy"]
        facts["wrapped_blocks"] = sum(1 for m in model.modules() if policy(module=m, recurse=False, nonwrapped_numel=0))
        facts["blocks"] = model.config.num_hidden_layers
        offload = plugin.fsdp_kwargs["cpu_offload"]
        facts["offload_params"] = bool(offload is not None and offload.offload_params)
    return facts


def write_facts(facts_dir, facts):
    with open(os.path.join(facts_dir, f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump(facts, f, default=int)  # numpy integers from the stage manager


def main():
    mode, jobs_path = sys.argv[1], sys.argv[2]
    with open(jobs_path) as f:
        jobs = json.load(f)
    import colossalai
    from colossalai.utils import set_seed

    launch_from_torch = colossalai.launch_from_torch

    def launch_once(seed=1024, **kwargs):
        if dist.is_initialized():
            set_seed(seed)
        else:
            launch_from_torch(seed=seed, **kwargs)

    colossalai.launch_from_torch = launch_once
    current = {}
    if mode == "construct":
        import colossalai.nn.optimizer
        from colossalai.booster import Booster

        class StandInAdam(torch.optim.AdamW):
            def __init__(self, params, lr=1e-3, weight_decay=0.0, adamw_mode=True, **_):
                super().__init__(params, lr=lr, weight_decay=weight_decay)

        colossalai.nn.optimizer.HybridAdam = StandInAdam

        def boost(self, model, optimizer, *args, **kwargs):
            write_facts(current["facts"], plugin_facts(self.plugin, model))
            raise Constructed()

        Booster.boost = boost
    for job in jobs:
        current["facts"] = job["facts"]
        sys.argv = [job["script"]]
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                runpy.run_path(job["script"], run_name="__main__")
            if mode == "steps":
                # The last rank prints "step N: loss L, ..." for every step.
                losses = [float(m) for m in re.findall(r"^step \d+: loss (\S+),", printed.getvalue(), re.MULTILINE)]
                write_facts(job["facts"], {"rank": dist.get_rank(), "finished": True, "losses": losses})
        except Constructed:
            pass
        except Exception as e:  # recorded for this script; the next one runs
            write_facts(job["facts"], {"rank": dist.get_rank(), "error": f"{type(e).__name__}: {e}"[:400]})
        dist.barrier()


if __name__ == "__main__":
    main()
