"""`tessera export --to torchtitan` job configs against torchtitan's own config code.

    python torchtitan_config.py TESSERA WORK [TORCHTITAN]

For each case `tessera plan --runtime torchtitan` makes plans and `tessera export
--to torchtitan` writes one's TOML job config. The file is then read as
torchtitan v0.2.2 reads it:
  - every table and key must be a field of its JobConfig dataclasses
    (torchtitan/config/job_config.py), with a value of the field's type: the
    ConfigManager refuses unknown keys but takes a TOML value of any type;
  - ConfigManager().parse_args(["--job.config_file", FILE]) builds the JobConfig;
  - ParallelDims (torchtitan/distributed/parallel_dims.py) validates the degrees
    against the plan's GPUs, and the batch degree (dp_replicate × dp_shard) and
    gradient accumulation steps follow as torchtitan/train.py derives them
    (global_batch_size // (local_batch_size × batch degree), which must divide).
Then what torchtitan derived is compared with the plan: data-parallel ranks,
replicas, context parallelism, micro-batch and micro-batches per step, sequence,
precision, recompute, resharding, offload and compilation; and the flavor named
must have the model's shape: the llama3 flavors are read from
torchtitan/models/llama3/__init__.py (llama3_args) and the defaults of
TransformerModelArgs (model/args.py) with Python's ast, and the MLP width from
FeedForward's rounding (model/model.py), against the model's config.json.

torchtitan comes from TORCHTITAN (a checkout), else from the mirror's tag v0.2.2;
its package is imported without running torchtitan/__init__.py, whose model
imports need a newer torch than the check's 2.5.1. Without a source the check
is skipped with one line (exit 77).
Exit 0: every case agrees; 1: one differs or torchtitan refuses a config.
"""
import ast
import dataclasses
import json
import logging
import os
import subprocess
import sys
import tomllib
import types
import typing

import mirrored_source

MIRROR = "/work/.mirror/pytorch+torchtitan/repo"
TAG = "v0.2.2"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = [  # (name, model, GPUs, global batch, seq, plan filters, which plan: a predicate on its plan.json entry)
    ("Llama 3 8B, the best plan", "llama-3-8b", 16, 64, 8192, [], lambda p: True),
    ("Llama 3 8B, op-level checkpointing over 2 replicas, compiled, not resharded", "llama-3-8b", 16, 64, 8192,
     ["--recompute", "op_selective", "--dp-replicate", "2", "--torch-compile"], lambda p: p["settings"].get("sharding_strategy") == "shard_grad_op"),
    ("Llama 3 8B, cp 2 at 32,768 tokens", "llama-3-8b", 16, 16, 32768, ["--cp", "2"], lambda p: True),
    ("Llama 3 70B, full recompute, CPU offload", "llama-3-70b", 16, 16, 4096, ["--recompute", "full"], lambda p: p["settings"].get("cpu_offload")),
    ("Llama 3 70B on 64 GPUs, fp32", "llama-3-70b", 64, 64, 4096, ["--precision", "fp32", "--recompute", "full"], lambda p: True),
    ("Llama 3 8B, every second block recomputed", "llama-3-8b", 16, 64, 8192, ["--recompute", "full", "--recompute-num-layers", "16"], lambda p: True),
]
RECOMPUTE = {"none": ("none", None), "full": ("full", None), "op_selective": ("selective", "op")}


def config_layers(model):
    """The shipped model's block count."""
    with open(os.path.join(REPO, "models", model + ".json")) as f:
        config = json.load(f)
    return config.get("num_hidden_layers", config.get("n_layer"))


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def torchtitan_source(work):
    """A directory holding torchtitan's package, or None."""
    given = os.environ.get("TORCHTITAN") or (sys.argv[3] if len(sys.argv) > 3 else "")
    if given:
        if not os.path.isfile(os.path.join(given, "torchtitan", "config", "job_config.py")):
            sys.exit(f"torchtitan config check: {given} holds no torchtitan/config/job_config.py; give a torchtitan checkout")
        return given
    return mirrored_source.extract(MIRROR, TAG, "torchtitan", os.path.join(work, "torchtitan-src"))


def import_torchtitan(source):
    """torchtitan's config and ParallelDims, its package's __init__ left unrun."""
    package = types.ModuleType("torchtitan")
    package.__path__ = [os.path.join(source, "torchtitan")]
    sys.modules["torchtitan"] = package
    from torchtitan.config import ConfigManager, JobConfig
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.tools.logging import logger
    logger.setLevel(logging.ERROR)  # its warning that the tokenizer is not downloaded: no run here needs it
    return ConfigManager, JobConfig, ParallelDims


def matches(value, annotation):
    """Whether a TOML value has the type a JobConfig field declares."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, a) for a in typing.get_args(annotation))
    if origin is list:
        (item,) = typing.get_args(annotation)
        return isinstance(value, list) and all(matches(v, item) for v in value)
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, annotation)


def unknown_or_mistyped(table, cls, where=""):
    """Each key of `table` that `cls` has no field for, or whose value is not the field's type."""
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    problems = []
    for key, value in table.items():
        name = f"{where}{key}"
        if key not in fields:
            problems.append(f"{name}: no such field in {cls.__name__}")
        elif dataclasses.is_dataclass(hints[key]):
            problems += unknown_or_mistyped(value, hints[key], name + ".") if isinstance(value, dict) else [f"{name}: not a table"]
        elif not matches(value, hints[key]):
            problems.append(f"{name}: {value!r} is not {hints[key]}")
    return problems


def llama3_flavors(source):
    """llama3_args as written in models/llama3/__init__.py, each over TransformerModelArgs's defaults."""
    def literal_fields(node):
        return {k.arg: ast.literal_eval(k.value) for k in node.keywords}

    root = os.path.join(source, "torchtitan", "models", "llama3")
    defaults = {}
    for node in ast.walk(ast.parse(open(os.path.join(root, "model", "args.py")).read())):
        if isinstance(node, ast.ClassDef) and node.name == "TransformerModelArgs":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and item.value is not None and isinstance(item.target, ast.Name):
                    try:
                        defaults[item.target.id] = ast.literal_eval(item.value)
                    except ValueError:
                        pass  # a default_factory
    flavors = {}
    for node in ast.walk(ast.parse(open(os.path.join(root, "__init__.py")).read())):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "llama3_args" for t in node.targets):
            for key, value in zip(node.value.keys, node.value.values):
                flavors[ast.literal_eval(key)] = {**defaults, **literal_fields(value)}
    return flavors


def ffn_width(args):
    """FeedForward's hidden width (models/llama3/model/model.py): 4·dim, two thirds, the multiplier, rounded up."""
    hidden = int(2 * (4 * args["dim"]) / 3)
    if args.get("ffn_dim_multiplier") is not None:
        hidden = int(args["ffn_dim_multiplier"] * hidden)
    multiple = args["multiple_of"]
    return multiple * ((hidden + multiple - 1) // multiple)


def shape_differences(flavor, config):
    """Where the flavor's model and the Hugging Face config differ."""
    heads = flavor["n_heads"]
    pairs = {
        "hidden": (flavor["dim"], config["hidden_size"]),
        "layers": (flavor["n_layers"], config["num_hidden_layers"]),
        "heads": (heads, config["num_attention_heads"]),
        "key/value heads": (flavor.get("n_kv_heads") or heads, config.get("num_key_value_heads", heads)),
        "MLP width": (ffn_width(flavor), config["intermediate_size"]),
        "vocabulary": (flavor["vocab_size"], config["vocab_size"]),
        "RoPE base": (flavor["rope_theta"], config.get("rope_theta", 10000.0)),
        "norm epsilon": (flavor["norm_eps"], config.get("rms_norm_eps")),
    }
    return [f"{k}: flavor {a}, model {b}" for k, (a, b) in pairs.items() if a != b]


def check_case(tessera, work, case, torchtitan, flavors):
    name, model, gpus, batch, seq, filters, pick = case
    plan_path = os.path.join(work, "plan.json")
    run([tessera, "plan", "--model", model, "--gpus", str(gpus), "--gpus-per-node", "8", "--global-batch", str(batch), "--seq", str(seq),
         "--runtime", "torchtitan", "--top", "100", "--output", plan_path] + filters)
    with open(plan_path) as f:
        document = json.load(f)
    index = next((i for i, p in enumerate(document["plans"]) if pick(p)), None)
    if index is None:
        return [f"no plan of the kind wanted among {len(document['plans'])}"]
    plan = document["plans"][index]
    config_path = os.path.join(work, "job.toml")
    run([tessera, "export", plan_path, "--to", "torchtitan", "--plan", str(index + 1), "--output", config_path])
    ConfigManager, JobConfig, ParallelDims = torchtitan
    with open(config_path, "rb") as f:
        problems = unknown_or_mistyped(tomllib.load(f), JobConfig)
    if problems:
        return problems
    job = ConfigManager().parse_args(["--job.config_file", config_path])
    p = job.parallelism
    dims = ParallelDims(dp_replicate=p.data_parallel_replicate_degree, dp_shard=p.data_parallel_shard_degree, cp=p.context_parallel_degree,
                        tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree, ep=p.expert_parallel_degree,
                        etp=p.expert_tensor_parallel_degree, world_size=gpus)
    batch_degree = dims.dp_replicate * dims.dp_shard
    t = job.training
    if t.global_batch_size % (t.local_batch_size * batch_degree) != 0:
        return [f"global_batch_size {t.global_batch_size} is not a multiple of local_batch_size {t.local_batch_size} × {batch_degree}"]
    layout, settings, training = plan["layout"], plan["settings"], plan["training"]
    recompute_mode, ac_option = RECOMPUTE[training["recompute"]]
    if training["recompute"] == "full" and training.get("recompute_num_layers", 0) > 0:
        # Some blocks: torchtitan's layer-level option n, whose every n-th block of L is ⌊L/n⌋ of them.
        recompute_mode = "selective"
        ac_option = str(next(n for n in range(2, config_layers(model) + 1) if config_layers(model) // n == training["recompute_num_layers"]))
    expected = {
        "data-parallel ranks": (batch_degree, layout["dp"]),
        "replicas": (dims.dp_replicate, layout["dp_replicate"]),
        "context parallelism": (dims.cp, layout["cp"]),
        "micro-batch": (t.local_batch_size, training["micro_batch_size"]),
        "micro-batches per step": (t.global_batch_size // (t.local_batch_size * batch_degree), training["num_micro_batches"]),
        "sequence": (t.seq_len, seq),
        "parameters gathered in": (t.mixed_precision_param, {"bf16": "bfloat16", "fp32": "float32"}[training["precision"]]),
        "recompute": (job.activation_checkpoint.mode, recompute_mode),
        "reshard after forward": (p.fsdp_reshard_after_forward, "never" if settings.get("sharding_strategy") == "shard_grad_op" else "default"),
        "CPU offload": (t.enable_cpu_offload, bool(settings.get("cpu_offload"))),
        "compiled": (job.compile.enable, training["torch_compile"]),
    }
    if ac_option:
        expected["selective checkpointing"] = (job.activation_checkpoint.selective_ac_option, ac_option)
    differences = [f"{k}: torchtitan {a!r}, plan {b!r}" for k, (a, b) in expected.items() if a != b]
    flavor = flavors.get(job.model.flavor) if job.model.name == "llama3" else None
    if flavor is None:
        return differences + [f"model {job.model.name} {job.model.flavor}: not a llama3 flavor of torchtitan {TAG}"]
    with open(os.path.join(REPO, "models", model + ".json")) as f:
        differences += shape_differences(flavor, json.load(f))
    print(f"  {name}: plan {index + 1} ({plan['description']}): {job.model.name} {job.model.flavor}, "
          f"dp {dims.dp_replicate} × {dims.dp_shard}, cp {dims.cp}, {t.global_batch_size // (t.local_batch_size * batch_degree)} micro-batches "
          f"of {t.local_batch_size}, ac {job.activation_checkpoint.mode}")
    return differences


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    tessera, work = sys.argv[1], sys.argv[2]
    source = torchtitan_source(work)
    if source is None:
        print(f"torchtitan config check: skipped: no torchtitan source (set TORCHTITAN to a checkout, or mirror pytorch/torchtitan at {MIRROR})")
        return 77
    torchtitan = import_torchtitan(source)
    flavors = llama3_flavors(source)
    print(f"torchtitan config check: {len(CASES)} exported job configs read by torchtitan {TAG}'s JobConfig, ConfigManager and ParallelDims")
    failed = 0
    for case in CASES:
        try:
            problems = check_case(tessera, work, case, torchtitan, flavors)
        except (subprocess.CalledProcessError, AssertionError, SystemExit, ValueError) as error:
            detail = error.stderr.strip() if isinstance(error, subprocess.CalledProcessError) else repr(error)
            problems = [f"refused: {detail}"]
        if problems:
            failed += 1
            print(f"FAIL {case[0]}:\n    " + "\n    ".join(problems))
    # The check itself: a misspelt key and a value torchtitan does not take are caught,
    # and torchtitan's own parser refuses the key too.
    last = os.path.join(work, "job.toml")
    if not os.path.isfile(last):
        print("FAIL the check's own test: no case wrote a job config")
        return 1
    with open(last, "rb") as f:
        broken = tomllib.load(f)
    broken["training"]["local_batch"] = broken["training"].pop("local_batch_size")
    broken["training"]["mixed_precision_param"] = "float16"
    caught = unknown_or_mistyped(broken, torchtitan[1])
    misspelt = os.path.join(work, "misspelt.toml")
    with open(misspelt, "w") as f:
        f.write(open(last).read().replace("local_batch_size =", "local_batch ="))
    try:
        torchtitan[0]().parse_args(["--job.config_file", misspelt])
        refused = False
    except ValueError as error:
        refused = "local_batch" in str(error)
    if len(caught) != 2 or not refused:
        failed += 1
        print(f"FAIL the check's own test: a misspelt key and a wrong value gave {caught}; torchtitan refused the key: {refused}")
    print(f"torchtitan config check: {len(CASES) - failed} of {len(CASES)} agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
