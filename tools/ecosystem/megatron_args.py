"""`tessera export --to megatron` scripts against Megatron-LM's own argument checks.

    python megatron_args.py TESSERA WORK [MEGATRON_LM]

For each case `tessera plan --runtime megatron` makes a plan and `tessera export
--to megatron` writes its launch script. The script is run with a stand-in
`torchrun` first on PATH that records its arguments and environment, so what is
checked is what the script would launch. Those arguments then go through
Megatron-LM's parse_args and validate_args (megatron/training/arguments.py,
with WORLD_SIZE the launch's GPUs, the device reported as a Hopper GPU and
Transformer Engine as installed, as on the machines the scripts target) and
core_transformer_config_from_args, whose TransformerConfig checks the layer
split. Then what Megatron derived is compared with the plan:
the data-parallel size, the distributed optimizer's instances (the plan's
replicas), the virtual pipeline size, the micro-batches per step, the padded
vocabulary (the NullTokenizer's, through _vocab_size_with_padding) against the
rows the planner counts (the vocabulary rounded up to a multiple of tp, its
vocab split), and the decoder layers of every pipeline rank and virtual stage
against the plan's stages (Megatron's layout where one is given; an even split
Megatron divides itself, having checked that the layers divide), and the
gradients' and weights' dtypes: whether Megatron accumulates and reduces in
fp32 (accumulate_allreduce_grads_in_fp32, which --grad-reduce-in-bf16 turns
off) and keeps the FP8 weights as parameters (fp8_param_gather), as the plan
counts them; and the recompute TransformerConfig runs (granularity, method and
layers: full recompute of every block, or of the first --recompute-num-layers
of each stage by the block method).

Megatron-LM comes from MEGATRON_LM (a checkout), else from the mirror's tag
core_v0.14.0, the newest that imports under the check's torch 2.5.1; without
either the check is skipped with one line (exit 77).
Exit 0: every case agrees; 1: one differs or Megatron refuses a script.
"""
import json
import os
import subprocess
import sys

import mirrored_source

MIRROR = "/work/.mirror/NVIDIA+Megatron-LM/repo"
TAG = "core_v0.14.0"
CASES = [  # (name, model, GPUs, global batch, seq, plan filters, GPU)
    ("Llama 2 7B, the best plan", "llama-2-7b", 16, 64, 4096, [], "h100-80g"),
    ("Llama 2 7B, the distributed optimizer in 2 replicas", "llama-2-7b", 16, 64, 4096, ["--dp-replicate", "2", "--zero-stage", "1"], "h100-80g"),
    ("Llama 2 70B, tp 4 x pp 4 interleaved", "llama-2-70b", 64, 256, 4096, ["--tp", "4", "--pp", "4", "--pp-schedule", "interleaved"], "h100-80g"),
    ("Llama 3 8B on 3 uneven stages, full recompute", "llama-3-8b", 24, 48, 8192, ["--pp", "3", "--recompute", "full"], "h100-80g"),
    ("Llama 2 70B, tp 4 x pp 4, 3 blocks of each stage recomputed", "llama-2-70b", 64, 256, 4096,
     ["--tp", "4", "--pp", "4", "--recompute", "full", "--recompute-num-layers", "3"], "h100-80g"),
    ("Qwen2 7B, cp 2, FP8", "qwen2-7b", 16, 32, 16384, ["--cp", "2", "--precision", "fp8"], "h100-80g"),
    ("Llama 3 8B, cp 2, FP8 with NeMo's gradient and weight dtypes", "llama-3-8b", 8, 128, 8192,
     ["--cp", "2", "--precision", "fp8", "--grad-reduce-in-bf16", "--fp8-param-gather"], "h100-80g"),
    ("GPT-2 large, tp 2 x pp 2, Korthikanti's profile", "gpt2-large", 8, 64, 1024, ["--tp", "2", "--pp", "2", "--activation-profile", "megatron"],
     "a100-80g"),
]


def run(cmd, **kwargs):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs).stdout


def megatron_source(work):
    """A directory holding Megatron-LM's megatron package, or None."""
    given = os.environ.get("MEGATRON_LM") or (sys.argv[3] if len(sys.argv) > 3 else "")
    if given:
        return given if os.path.isdir(os.path.join(given, "megatron", "training")) else None
    return mirrored_source.extract(MIRROR, TAG, "megatron", os.path.join(work, "megatron-lm"))


def launched(script, work):
    """The arguments and environment the script hands torchrun."""
    stub_dir = os.path.join(work, "stub")
    os.makedirs(stub_dir, exist_ok=True)
    record = os.path.join(work, "launch.json")
    stub = os.path.join(stub_dir, "torchrun")
    with open(stub, "w") as f:
        f.write("#!/usr/bin/env python3\nimport json, os, sys\n"
                f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ)}}, open({record!r}, 'w'))\n")
    os.chmod(stub, 0o755)
    env = dict(os.environ, PATH=stub_dir + os.pathsep + os.environ["PATH"], NNODES="", NODE_RANK="", MASTER_ADDR="")
    for key in ("NNODES", "NODE_RANK", "MASTER_ADDR", "CUDA_DEVICE_MAX_CONNECTIONS", "MEGATRON_LM", "TRAIN_ITERS"):
        env.pop(key, None)
    run(["bash", script], env=env)
    with open(record) as f:
        return json.load(f)


def probe(source, launch):
    """Megatron's reading of the launch, in a child process (its parser reads sys.argv and the environment)."""
    argv = launch["argv"]
    script_at = next(i for i, a in enumerate(argv) if a.endswith("pretrain_gpt.py"))
    options = dict(zip(argv[:script_at:2], argv[1:script_at:2]))
    world = int(options["--nproc-per-node"]) * int(options["--nnodes"])
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    env.update(RANK="0", WORLD_SIZE=str(world), PYTHONPATH=source)
    if "CUDA_DEVICE_MAX_CONNECTIONS" in launch["env"]:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = launch["env"]["CUDA_DEVICE_MAX_CONNECTIONS"]
    child = subprocess.run([sys.executable, __file__, "--probe", json.dumps(argv[script_at:])], env=env, capture_output=True, text=True)
    if child.returncode != 0:
        lines = [l for l in child.stderr.strip().splitlines() if l.strip()]
        return None, lines[-1] if lines else f"exit {child.returncode}"
    return json.loads(child.stdout.strip().splitlines()[-1]), None


def probe_main(argv):
    """In the child: parse and validate as pretrain_gpt.py would, print what Megatron derived."""
    import torch
    sys.argv = argv
    import megatron.training.arguments as arguments
    # No GPU here, nor Transformer Engine: report the plans' Hopper GPU where
    # validate_args asks for the device, and TE as installed (with its fused RoPE)
    # where TransformerConfig asks for it, as on the machine the script targets.
    arguments.get_device_arch_version = lambda: 9
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
    import megatron.core.transformer.transformer_config as transformer_config
    import megatron.core.models.common.embeddings.rope_utils as rope_utils
    transformer_config.is_te_min_version = lambda *a, **k: True
    rope_utils.fused_apply_rotary_pos_emb = rope_utils.fused_apply_rotary_pos_emb or (lambda *a, **k: None)
    args = arguments.parse_args()
    arguments.validate_args(args)
    config = arguments.core_transformer_config_from_args(args)
    from megatron.training.tokenizer.tokenizer import _vocab_size_with_padding
    from megatron.training.tokenizer.tokenizer import _NullTokenizer
    vocab = _vocab_size_with_padding(_NullTokenizer(args.vocab_size).vocab_size, args, logging_enabled=False)
    pp = args.pipeline_model_parallel_size
    vpp = args.virtual_pipeline_model_parallel_size or 1
    layers = []  # [pp rank][virtual stage]: decoder layers
    layout = getattr(config, "pipeline_model_parallel_layout", None)
    if layout is not None:
        from megatron.core.transformer.enums import LayerType
        layers = [[layout.layout[rank][v].count(LayerType.decoder) for v in range(vpp)] for rank in range(pp)]
    else:
        layers = [[args.num_layers // (pp * vpp)] * vpp for _ in range(pp)]
    print(json.dumps({"dp": args.data_parallel_size, "replicas": args.num_distributed_optimizer_instances, "vpp": vpp, "micro_batches": args.global_batch_size // (args.micro_batch_size * args.data_parallel_size),
                      "padded_vocab": vocab, "layers": layers, "fp32_gradients": args.accumulate_allreduce_grads_in_fp32,
                      "fp8_param_gather": args.fp8_param_gather,
                      "recompute": [config.recompute_granularity, config.recompute_method, config.recompute_num_layers]}))


def planned(tessera, work, name, model, gpus, batch, seq, filters, gpu):
    """The case's plan (its first) and the path of its launch script."""
    directory = os.path.join(work, "".join(c if c.isalnum() else "-" for c in name))
    os.makedirs(directory)
    plan_path = os.path.join(directory, "plan.json")
    run([tessera, "plan", "--runtime", "megatron", "--model", model, "--gpus", str(gpus), "--gpu", gpu, "--global-batch", str(batch),
         "--seq", str(seq), "--top", "1", *filters, "-o", plan_path])
    script = os.path.join(directory, "train_megatron.sh")
    run([tessera, "export", plan_path, "--to", "megatron", "-o", script])
    with open(plan_path) as f:
        document = json.load(f)
    return document, script


def expected(document):
    """What Megatron should derive, from the plan and its memory estimate."""
    plan = document["plans"][0]
    layout, training = plan["layout"], plan["training"]
    chunks = plan["settings"].get("num_model_chunks", 1) if plan["settings"].get("pp_style") == "interleaved" else 1
    vocab = document["model"]["vocab_size"]
    tp = layout["tp"]
    # A row of the estimate covers stages first..last alike (their blocks in one range, or in chunks).
    layers = [None] * layout["pp"]
    for rank in plan["memory"]["ranks"]:
        first, last = rank["pipeline_stages"]
        stages = last - first + 1
        spans = rank["layer_chunks"] or [rank["layers"]]
        for stage in range(first, last + 1):
            layers[stage] = [(span[1] - span[0] + 1) // stages for span in spans]
    settings = plan["settings"]
    # Megatron-LM accumulates and reduces bf16 (and FP8) runs' gradients in fp32 unless --grad-reduce-in-bf16.
    fp32_gradients = training["precision"] in ("bf16", "fp8") and not settings.get("grad_reduce_in_bf16", False)
    # Full recompute: every block (uniform, 1), or the first K of each chunk (block, K); selective: the attention core.
    blocks = training.get("recompute_num_layers", 0)
    recompute = {"none": [None, None, None], "selective": ["selective", None, None],
                 "full": ["full", "block", blocks] if blocks else ["full", "uniform", 1]}[training["recompute"]]
    return {"dp": layout["dp"], "replicas": layout["dp_replicate"], "vpp": chunks, "micro_batches": training["num_micro_batches"], "padded_vocab": -(-vocab // tp) * tp,
            "layers": layers, "fp32_gradients": fp32_gradients, "fp8_param_gather": settings.get("fp8_param_gather", False), "recompute": recompute}


def main():
    tessera, work = sys.argv[1], sys.argv[2]
    source = megatron_source(work)
    if source is None:
        print(f"megatron_args: skipped: no Megatron-LM checkout (set MEGATRON_LM, or mirror {TAG} at {MIRROR})")
        return 77
    failures = 0
    for name, model, gpus, batch, seq, filters, gpu in CASES:
        document, script = planned(tessera, work, name, model, gpus, batch, seq, filters, gpu)
        derived, refusal = probe(source, launched(script, os.path.dirname(script)))
        if refusal:
            print(f"FAIL {name}: Megatron refuses the script: {refusal}")
            failures += 1
            continue
        want = expected(document)
        differing = {k: (derived[k], want[k]) for k in want if derived[k] != want[k]}
        print(f"{'FAIL' if differing else 'ok  '} {name}: {document['plans'][0]['description']}: Megatron derives dp {derived['dp']}, "
              f"{derived['replicas']} optimizer instance(s), vpp {derived['vpp']}, {derived['micro_batches']} micro-batches, vocabulary {derived['padded_vocab']}, layers {derived['layers']}, "
              f"recompute {derived['recompute']}"
              + (f"; differs from the plan (Megatron, plan): {differing}" if differing else ""))
        failures += bool(differing)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--probe":
        probe_main(json.loads(sys.argv[2]))
    else:
        sys.exit(main())
