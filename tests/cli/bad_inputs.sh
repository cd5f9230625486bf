#!/usr/bin/env bash
# The tessera binary as a user runs it, on bad input: every case must exit with
# code 2 and print exactly one line on stderr, naming the field, and nothing on
# stdout. Then one good run, whose JSON must parse.
#
# usage: bad_inputs.sh <path of tessera> <tests/cli/data>
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 <path of tessera> <tests/cli/data>" >&2
  exit 2
fi
tessera=$1
data=$2
if [ ! -x "$tessera" ]; then
  echo "bad_inputs.sh: '$tessera' is not an executable" >&2
  exit 2
fi
if [ ! -d "$data" ]; then
  echo "bad_inputs.sh: '$data' is not a directory" >&2
  exit 2
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
out=$scratch/stdout
err=$scratch/stderr

failures=0
cases=0

fail() {
  echo "FAIL [$1]: $2" >&2
  echo "  command: tessera ${3}" >&2
  echo "  exit code: $4" >&2
  echo "  stdout: $(head -c 300 "$out")" >&2
  echo "  stderr: $(head -c 300 "$err")" >&2
  failures=$((failures + 1))
}

# bad <case name> <substring expected on stderr> -- <tessera arguments...>
bad() {
  local name=$1 needle=$2
  shift 3
  cases=$((cases + 1))
  local code=0
  # A time limit: a FIFO or device given as an input must be refused, not waited on.
  timeout 60 "$tessera" "$@" >"$out" 2>"$err" </dev/null || code=$?
  local lines terminated
  lines=$(wc -l <"$err")                       # newline characters
  terminated=$(awk 'END { print NR }' "$err")  # lines, an unterminated last one included
  if [ "$code" -ne 2 ]; then
    fail "$name" "exit code $code, expected 2" "$*" "$code"
  elif [ -s "$out" ]; then
    fail "$name" "printed on stdout" "$*" "$code"
  elif [ "$lines" -ne 1 ] || [ "$terminated" -ne 1 ]; then
    fail "$name" "expected exactly one line on stderr, got $terminated" "$*" "$code"
  elif ! grep -qF -- "$needle" "$err"; then
    fail "$name" "stderr does not contain '$needle'" "$*" "$code"
  else
    echo "ok   [$name] $(cat "$err")"
  fi
}

# Input files.
bad missing-model-file "--model" -- estimate --model "$data/does-not-exist.json"
bad malformed-json "not valid JSON" -- estimate --model "$data/malformed.json"
bad unknown-model-type "model_type" -- estimate --model "$data/unknown-model-type.json"
bad missing-hidden-size "hidden_size" -- estimate --model "$data/missing-hidden-size.json"
bad directory-as-model "--model" -- estimate --model "$data"
bad unknown-model-name "--model" -- estimate --model no-such-model

# Inputs that are not regular files, or too large: refused before reading.
mkfifo "$scratch/fifo.json"
truncate -s 17M "$scratch/huge.json"
bad model-dev-zero "--model: '/dev/zero' is not a regular file (a character device)" -- estimate --model /dev/zero
bad model-dev-urandom "--model: '/dev/urandom' is not a regular file (a character device)" -- estimate --model /dev/urandom
bad model-fifo "is not a regular file (a FIFO)" -- estimate --model "$scratch/fifo.json"
bad model-too-large "more than the 16 MiB this input may hold" -- estimate --model "$scratch/huge.json"
bad gpu-dev-zero "--gpu: '/dev/zero' is not a regular file" -- estimate --model gpt2 --gpu /dev/zero
bad plan-file-dev-zero "plan file: '/dev/zero' is not a regular file" -- export /dev/zero --to deepspeed
bad compare-dev-zero "metrics: '/dev/zero' is not a regular file" -- compare /dev/zero /dev/zero

# The layout against the model.
bad tp-does-not-divide-heads "--tp" -- estimate --model gpt2 --plugin hybrid_parallel --tp 5
bad pp-exceeds-layers "--pp" -- estimate --model gpt2 --plugin hybrid_parallel --pp 13
bad tp-without-hybrid "--tp" -- estimate --model gpt2 --tp 2
bad seq-exceeds-positions "--seq" -- estimate --model gpt2 --seq 2048

# ZeRO stages.
bad zero2-with-pp "--zero-stage" -- estimate --model gpt2 --plugin hybrid_parallel --pp 2 --zero-stage 2
bad zero3-hybrid "--zero-stage" -- estimate --model gpt2 --plugin hybrid_parallel --zero-stage 3
bad zero3-low-level-zero "--zero-stage" -- estimate --model gpt2 --plugin low_level_zero --zero-stage 3
bad zero-stage-on-ddp "--zero-stage" -- estimate --model gpt2 --zero-stage 1
bad runtime-unknown "--runtime" -- estimate --model gpt2 --runtime nemo
bad runtime-megatron-fsdp "--runtime megatron models" -- estimate --model gpt2 --plugin torch_fsdp --runtime megatron
bad runtime-megatron-zero2 "--zero-stage 2 under --runtime megatron" -- estimate --model gpt2 --plugin hybrid_parallel --runtime megatron --zero-stage 2
bad runtime-deepspeed-stage1 "--runtime deepspeed models ZeRO-3" -- estimate --model gpt2 --plugin low_level_zero --runtime deepspeed --zero-stage 1
bad runtime-deepspeed-negative "--stage3-prefetch-bucket-size" -- estimate --model gpt2 --plugin low_level_zero --runtime deepspeed --stage3-prefetch-bucket-size -1
bad runtime-deepspeed-sub-group "--sub-group-size must be a number of elements" -- estimate --model gpt2 --plugin low_level_zero --runtime deepspeed --sub-group-size -1
bad runtime-deepspeed-offload-sgd "steps with DeepSpeedCPUAdam: use --optimizer adam or adamw" -- estimate --model gpt2 --plugin low_level_zero --runtime deepspeed --cpu-offload --optimizer sgd
bad offload-param-colossalai "--offload-param is DeepSpeed ZeRO-3's offload_param" -- estimate --model gpt2 --plugin low_level_zero --offload-param
bad pin-memory-word "--pin-memory: maybe not in {true,false}" -- estimate --model gpt2 --plugin gemini --pin-memory maybe
bad runtime-torchtitan-fp16 "--precision fp16 under --runtime torchtitan" -- estimate --model gpt2 --plugin torch_fsdp --runtime torchtitan --precision fp16
bad fused-rmsnorm-not-torchtitan "--fused-rmsnorm is torchtitan's Triton RMSNorm" -- estimate --model llama-3-8b --plugin torch_fsdp --dp 8 --fused-rmsnorm
bad fused-rmsnorm-gpt2 "a Llama-shaped model" -- estimate --model gpt2 --plugin torch_fsdp --runtime torchtitan --dp 8 --fused-rmsnorm
bad fused-rmsnorm-compiled "no --torch-compile" -- estimate --model llama-3-8b --plugin torch_fsdp --runtime torchtitan --dp 8 --torch-compile --fused-rmsnorm
bad fused-rmsnorm-megatron-profile "--activation-profile flash" -- estimate --model llama-3-8b --plugin torch_fsdp --runtime torchtitan --dp 8 --activation-profile megatron --fused-rmsnorm
bad compile-model-only-eager "--compile-model-only leaves torchtitan's loss out of torch.compile" -- estimate --model llama-3-8b --plugin torch_fsdp --runtime torchtitan --dp 8 --compile-model-only
bad plan-compile-model-only-eager "add --runtime torchtitan and --torch-compile" -- plan --model llama-3-8b --gpus 8 --global-batch 8 --runtime torchtitan --compile-model-only
bad plan-fused-rmsnorm-colossalai "--fused-rmsnorm is torchtitan's Triton RMSNorm" -- plan --model llama-3-8b --gpus 8 --global-batch 8 --fused-rmsnorm

# Sizes: zero, negative, not a number, too large.
bad micro-batch-zero "--micro-batch" -- estimate --model gpt2 --micro-batch 0
bad seq-negative "--seq" -- estimate --model gpt2 --seq -5
bad dp-zero "--dp" -- estimate --model gpt2 --dp 0
bad dp-negative "--dp" -- estimate --model gpt2 --dp -3
bad dp-not-a-number "--dp" -- estimate --model gpt2 --dp abc
bad seq-fraction "--seq" -- estimate --model gpt2 --seq 1.5
bad dp-too-large "--dp" -- estimate --model gpt2 --dp 99999999999999999999
bad dp-hexadecimal "--dp: '0x10' is not a whole number" -- estimate --model gpt2 --dp 0x10
bad steps-beyond-int64 "--steps: '9223372036854775808' is not a whole number in range" -- train --out "$scratch/never" --steps 9223372036854775808
bad train-fp8 "--precision fp8: Tessera's engine runs on the CPU, which has no FP8 GEMMs" -- train --out "$scratch/never" --precision fp8
bad fp8-on-v100 "--precision fp8 is not supported by v100-32g" -- estimate --model gpt2 --gpu v100-32g --precision fp8 --runtime megatron
bad fp8-plan-on-a100 "--precision fp8 is not supported by a100-80g" -- plan --model gpt2 --gpus 8 --global-batch 64 --gpu a100-80g --precision fp8
bad cp-zero "--cp must be a positive integer" -- estimate --model gpt2 --plugin hybrid_parallel --cp 0
bad cp-odd-sequence "must be a multiple of 2 × --cp = 6" -- estimate --model llama-2-7b --plugin hybrid_parallel --cp 3 --seq 4000
bad cp-without-ring "--cp 2 needs --plugin hybrid_parallel, or torch_fsdp with --runtime torchtitan" -- estimate --model gpt2 --cp 2
bad cp-plan-not-dividing "--cp 3 does not divide the 8 GPUs" -- plan --model gpt2 --gpus 8 --global-batch 64 --cp 3
bad train-cp-ranks "dp 1 × tp 1 × pp 1 × cp 2 needs 2 ranks but no launcher started other ranks" -- train --out "$scratch/never" --plugin hybrid_parallel --cp 2
bad train-cp-sequence "must be a multiple of 2 × --cp = 4" -- train --out "$scratch/never" --plugin hybrid_parallel --cp 2 --seq 30 --dry-run --rank 0
bad replicate-not-dividing "--dp-replicate 3 does not divide --dp 8" -- estimate --model gpt2 --plugin torch_fsdp --dp 8 --dp-replicate 3
bad replicate-ddp "--dp-replicate 2 needs sharded model states" -- estimate --model gpt2 --dp 8 --dp-replicate 2
bad replicate-zero "--dp-replicate must be a positive integer" -- estimate --model gpt2 --plugin torch_fsdp --dp 8 --dp-replicate 0
bad replicate-plan "--dp-replicate 3 must be a positive divisor of the 8 GPUs" -- plan --model gpt2 --gpus 8 --global-batch 64 --dp-replicate 3
bad train-replicate "--dp-replicate 2: the engine shards over every data-parallel rank" -- train --out "$scratch/never" --plugin low_level_zero --dp 2 --dp-replicate 2
bad seed-negative "--seed: '-1' is not a whole number in range 0 to" -- train --out "$scratch/never" --seed -1
bad fraction-out-of-range "--shard-param-frac" -- estimate --model gpt2 --plugin gemini --shard-param-frac 1.5
bad bucket-negative "--bucket-mb" -- estimate --model gpt2 --bucket-mb -1
bad memory-headroom-unit "--memory-headroom: '2GiB' is not a size; give GiB from 0 to 1048576 (e.g. 2) or a percentage" -- estimate --model gpt2 --memory-headroom 2GiB
bad plan-memory-headroom-percent "--memory-headroom: '150%'" -- plan --model gpt2 --global-batch 64 --memory-headroom 150% --output "$scratch/never.json"
bad transformers-unread-release "--transformers-version 4.40: the hf profiles model llama on transformers 4.31-4.33 or 5.0-5.17" -- estimate --model llama-2-7b --activation-profile hf --transformers-version 4.40
bad transformers-not-a-release "--transformers-version 'latest' is not a release X.Y" -- estimate --model gpt2 --activation-profile hf --transformers-version latest
bad transformers-without-hf "--transformers-version applies to the hf profiles (hf, hf_eager, hf_autocast), not --activation-profile flash" -- estimate --model gpt2 --transformers-version 4.32
bad plan-transformers-mistral "--transformers-version 4.32: the hf profiles model mistral on transformers 5.0-5.17" -- plan --model mistral-7b --gpus 8 --global-batch 64 --activation-profile hf --transformers-version 4.32 --output "$scratch/never.json"
bad activations-overflow "--seq" -- estimate --model llama-2-7b --seq 1048576 --micro-batch 65536 --activation-profile megatron
bad chunk-size-too-large "--chunk-size" -- estimate --model gpt2 --plugin gemini --chunk-size 9223372036854775807
bad estimate-gemini-fp32 "--precision fp32: Gemini runs mixed precision only" -- estimate --model gpt2 --plugin gemini --precision fp32
bad estimate-recompute-num-layers-over "--recompute-num-layers 13 exceeds the 12 layers of gpt2; use at most 12, or 0 for every block" -- estimate --model gpt2 --recompute full --recompute-num-layers 13
bad chunk-size-uneven "--chunk-size 45101057 must be a multiple of --dp 8" -- estimate --model llama-2-7b --plugin gemini --dp 8 --chunk-size 45101057
bad plan-chunk-size-uneven "--chunk-size 45101057 must be 0 (search) or a positive multiple of the 8 GPUs" -- plan --model llama-2-7b --gpus 8 --global-batch 64 --plugin gemini --chunk-size 45101057 --output "$scratch/never.json"
bad search-interval-too-fine "--search-interval" -- estimate --model gpt2 --plugin gemini --search-range-m 4096 --search-interval 1
bad interleaved-without-pipeline "--pp-schedule" -- estimate --model gpt2 --pp-schedule interleaved --model-chunks 2
bad interleaved-one-chunk "--model-chunks" -- estimate --model gpt2 --plugin hybrid_parallel --pp 2 --micro-batches 2 --pp-schedule interleaved
bad chunks-without-interleaving "--model-chunks" -- estimate --model gpt2 --plugin hybrid_parallel --pp 2 --model-chunks 2
bad chunks-beyond-layers "--model-chunks" -- estimate --model gpt2 --plugin hybrid_parallel --pp 2 --micro-batches 2 --pp-schedule interleaved --model-chunks 9223372036854775807
bad one-f-one-b-too-few-micro-batches "--micro-batches 2 is below --pp 4: ColossalAI's 1F1B schedule" -- estimate --model gpt2 --plugin hybrid_parallel --pp 4 --micro-batches 2
bad megatron-unequal-chunks "--model-chunks 4 does not divide the blocks of every stage (6 × 2), which Megatron-Core requires; use --model-chunks 2, 3, 6" -- estimate --model gpt2 --runtime megatron --plugin hybrid_parallel --pp 2 --micro-batches 2 --pp-schedule interleaved --model-chunks 4
bad interleaved-micro-batches "--micro-batches" -- estimate --model gpt2 --plugin hybrid_parallel --pp 4 --micro-batches 6 --pp-schedule interleaved --model-chunks 2

# Names.
bad unknown-gpu "--gpu" -- estimate --model gpt2 --gpu tpu-v5
bad unknown-plugin "--plugin" -- estimate --model gpt2 --plugin deepspeed
bad unknown-precision "--precision" -- estimate --model gpt2 --precision fp4
bad unknown-format "--format" -- estimate --model gpt2 --format xml
bad unknown-option "--bogus" -- estimate --model gpt2 --bogus
bad missing-model-option "--model" -- estimate --dp 2
bad unknown-verb "bogus" -- bogus

# Output: only a regular file is replaced.
bad output-in-missing-directory "--output" -- estimate --model gpt2 --output "$scratch/no/such/dir/report.json"
# No device node (the reported --output /dev/full): run as root, a regression would replace it.
bad output-fifo "is a FIFO; Tessera only replaces regular files" -- estimate --model gpt2 --output "$scratch/fifo.json"
bad output-directory "is a directory; Tessera only replaces regular files" -- estimate --model gpt2 --output "$scratch"
ln -s "$scratch/huge.json" "$scratch/link.json"
bad output-symlink "is a symbolic link; Tessera only replaces regular files" -- estimate --model gpt2 --output "$scratch/link.json"
if [ ! -L "$scratch/link.json" ]; then
  echo "FAIL [output-symlink]: the symbolic link was replaced" >&2
  failures=$((failures + 1))
fi

# tessera plan: filters that leave no candidate are usage errors, not "NOTHING FITS".
plan_args=(plan --model gpt2 --gpus 8 --global-batch 64 --output "$scratch/never.json")
bad plan-micro-batch "--micro-batch 7 does not divide --global-batch 64" -- "${plan_args[@]}" --micro-batch 7
bad plan-tp-without-hybrid "--tp/--pp above 1 need --plugin hybrid_parallel (gemini" -- "${plan_args[@]}" --plugin gemini --tp 2
bad plan-dp-times-tp "--dp 4 × --tp 4 = 16 does not divide the 8 GPUs" -- "${plan_args[@]}" --dp 4 --tp 4
bad plan-zero-stage-with-pipeline "--zero-stage 2 cannot be combined with --pp 2" -- "${plan_args[@]}" --zero-stage 2 --pp 2
bad plan-zero-stage-gemini "--zero-stage 1 does not apply to --plugin gemini" -- "${plan_args[@]}" --plugin gemini --zero-stage 1
bad plan-gemini-fp32 "--precision fp32: Gemini runs mixed precision only (bf16 or fp16, fp32 master weights); use --precision bf16 or fp16" -- "${plan_args[@]}" --plugin gemini --precision fp32
bad plan-gemini-sgd "--optimizer sgd: Gemini's optimizer is an Adam" -- "${plan_args[@]}" --plugin gemini --optimizer sgd
bad plan-hybrid-without-tp-or-pp "--plugin hybrid_parallel with --tp 1 and --pp 1 is plain data parallelism" -- "${plan_args[@]}" --plugin hybrid_parallel --tp 1 --pp 1
bad plan-pp-layers "--pp 20 exceeds the 12 layers of gpt2; use at most --pp 12" -- plan --model gpt2 --gpus 40 --global-batch 64 --pp 20 --output "$scratch/never.json"
bad plan-tp-heads "--tp 5 does not divide num_attention_heads 12 of gpt2" -- plan --model gpt2 --gpus 10 --gpus-per-node 10 --global-batch 60 --tp 5 --output "$scratch/never.json"
# Issue 14 D20: a 64-head model on GPUs that --tp 3 divides is refused for its heads, not "NOTHING FITS" with exit 0.
bad plan-tp-heads-64 "--tp 3 does not divide num_attention_heads 64 of llama-2-70b; use --tp 1, 2, 4, 8" -- plan --model llama-2-70b --gpus 96 --global-batch 96 --tp 3 --output "$scratch/never.json"
bad plan-tp-divides-no-gpus "--tp 3 does not divide the 8 GPUs; use --tp 1, 2, 4, 8" -- plan --model llama-2-7b --gpus 8 --global-batch 64 --tp 3 --output "$scratch/never.json"
bad plan-batch-over-no-layout "--global-batch 1 does not split evenly over the data-parallel ranks of any layout of gpt2-xl on 64 GPUs (data-parallel sizes 2, 4" -- plan --model gpt2-xl --gpus 64 --global-batch 1 --output "$scratch/never.json"
bad plan-every-candidate-refused "the estimate refuses every candidate" -- plan --model opt-1.3b --gpus 8 --global-batch 64 --activation-profile hf --plugin hybrid_parallel --tp 2 --output "$scratch/never.json"
bad plan-pp-schedule-gpipe "--pp-schedule gpipe: the search runs ColossalAI's pipelines, 1F1B and interleaved" -- "${plan_args[@]}" --pp-schedule gpipe
bad plan-sequence-parallel-choice "--sequence-parallel 'maybe' is not one of: on, off, both" -- "${plan_args[@]}" --sequence-parallel maybe
bad plan-runtime-unknown "--runtime 'megatron-lm' is not one of: colossalai, megatron, torchtitan, deepspeed" -- "${plan_args[@]}" --runtime megatron-lm
bad plan-runtime-plugin "--runtime megatron searches hybrid_parallel plans, its model states: drop --plugin gemini" -- "${plan_args[@]}" --runtime megatron --plugin gemini
bad plan-runtime-zero-stage "--runtime deepspeed models ZeRO-3: use --zero-stage 3 (its default there), --plugin hybrid_parallel for its pipeline engine at stage 1, or --runtime colossalai for stages 1 and 2" -- "${plan_args[@]}" --runtime deepspeed --zero-stage 2
bad plan-runtime-torchtitan-one-gpu "--runtime torchtitan shards over 2 GPUs or more (FSDP2)" -- plan --model gpt2 --gpus 1 --gpus-per-node 1 --global-batch 8 --runtime torchtitan --output "$scratch/never.json"
bad plan-runtime-torchtitan-tp "--tp and --pp under --runtime torchtitan: torchtitan's FSDP2 is modelled over --dp and --cp only" -- "${plan_args[@]}" --runtime torchtitan --tp 2
bad plan-op-selective-runtime "--recompute op_selective is torchtitan's op-level checkpointing: add --runtime torchtitan" -- "${plan_args[@]}" --recompute op_selective
bad plan-recompute-num-layers-negative "--recompute-num-layers must be a positive count of blocks (or 0 for every block), got -2" -- "${plan_args[@]}" --recompute full --recompute-num-layers -2
if [ -e "$scratch/never.json" ]; then
  echo "FAIL [plan-filters]: a refused plan wrote its output" >&2
  failures=$((failures + 1))
fi

# tessera compare: byte counts must be whole and bounded.
"$tessera" estimate --model gpt2 --format json --output "$scratch/estimate.json" >/dev/null 2>&1 </dev/null
bad compare-float-bytes "metrics-float-bytes.json: \"ranks\"[0] category 'activations' device_bytes must be a whole number of bytes" -- compare "$scratch/estimate.json" "$data/metrics-float-bytes.json"
# A run of another model than the plan's is refused, not compared.
"$tessera" train --model tiny-gpt2 --steps 1 --seq 16 --out "$scratch/tiny-run" >/dev/null 2>&1 </dev/null
bad compare-other-model "is for gpt2 (124.4M parameters) but $scratch/tiny-run/metrics.json measured tiny-gpt2 (437.8K parameters)" -- compare "$scratch/estimate.json" "$scratch/tiny-run/metrics.json"
bad compare-one-file "compare takes the plan and what the run measured, two files: tessera compare $scratch/tiny-run/plan.json $scratch/tiny-run/metrics.json" -- compare "$scratch/tiny-run"
bad train-plan-of-an-estimate "an estimate of one set-up (tessera estimate, or tessera train's DIR/plan.json), not a plan file" -- train --plan "$scratch/tiny-run/plan.json" --out "$scratch/never"
bad train-plan-number-alone "--plan-number picks a plan of the file --plan names; give --plan too" -- train --plan-number 2 --out "$scratch/never"
bad estimate-tp-kv-heads "--tp 3 does not divide num_attention_heads 32 of llama-3-8b; choose one of 1, 2, 4, 8 (dividing its heads, key/value heads and MLP width)" -- estimate --model llama-3-8b --plugin hybrid_parallel --tp 3
bad plan-headroom-whole-gpu "--memory-headroom 100.0 GiB is all of the h100-80g's 79.65 GiB or more" -- plan --model gpt2 --gpus 8 --global-batch 64 --memory-headroom 100 --output "$scratch/never.json"
bad estimate-output-pdf "--output $scratch/report.pdf: tessera estimate writes text, md, html, csv or json; a PDF report is the desktop app's" -- estimate --model gpt2 --output "$scratch/report.pdf"
bad train-model-states-too-large "its parameters, gradients and optimizer states alone take" -- train --model llama-3-70b --out "$scratch/never"

# tessera export: the plan file and the options.
plan_file=$scratch/plan.json
if ! "$tessera" plan --model gpt2 --gpus 8 --global-batch 64 --top 3 --output "$plan_file" >/dev/null 2>&1 </dev/null; then
  echo "FAIL [export-setup]: tessera plan did not write $plan_file" >&2
  failures=$((failures + 1))
fi
fp8_plan=$scratch/fp8-plan.json
"$tessera" plan --model gpt2 --gpus 8 --global-batch 64 --top 1 --precision fp8 --runtime megatron --output "$fp8_plan" >/dev/null 2>&1 </dev/null
bad plan-fp8-colossalai "--precision fp8 counts Transformer Engine's FP8 layers as Megatron-Core runs them: add --runtime megatron" -- plan --model gpt2 --gpus 8 --global-batch 64 --precision fp8 --output "$scratch/never.json"
bad estimate-fp8-deepspeed "add --runtime megatron (deepspeed's own FP8 is not modelled" -- estimate --model gpt2 --dp 8 --precision fp8 --runtime deepspeed
bad export-fp8-colossalai "the plan counts megatron's model states, which colossalai would not keep" -- export "$fp8_plan" --to colossalai
bad plan-megatron-bloom "--runtime megatron: bloom-176b has a LayerNorm after the embedding" -- plan --model bloom-176b --gpus 64 --global-batch 64 --runtime megatron --output "$scratch/never.json"
bad estimate-megatron-neox "--runtime megatron: gpt-neox-20b has parallel attention and MLP residuals (GPT-NeoX)" -- estimate --model gpt-neox-20b --runtime megatron --tp 8
bad plan-megatron-hf-profile "--runtime megatron keeps what Transformer Engine's fused attention keeps: use --activation-profile flash" -- plan --model gpt2 --gpus 8 --global-batch 64 --runtime megatron --activation-profile hf --output "$scratch/never.json"
cp_plan=$scratch/cp-plan.json
"$tessera" plan --model llama-2-7b --gpus 8 --global-batch 8 --seq 16384 --cp 2 --top 1 --output "$cp_plan" >/dev/null 2>&1 </dev/null
bad export-cp-colossalai "(context parallelism), which a colossalai export does not set up; plan again with --cp 1" -- export "$cp_plan" --to colossalai
compiled_plan=$scratch/compiled-plan.json
"$tessera" plan --model gpt2 --gpus 8 --global-batch 64 --top 1 --activation-profile hf --torch-compile --output "$compiled_plan" >/dev/null 2>&1 </dev/null
bad export-compiled-colossalai "under torch.compile (--torch-compile), which a colossalai export does not set up" -- export "$compiled_plan" --to colossalai
hybrid_plan=$scratch/hybrid-plan.json
"$tessera" plan --model gpt2 --gpus 16 --global-batch 64 --dp-replicate 2 --top 1 --output "$hybrid_plan" >/dev/null 2>&1 </dev/null
bad export-replicate-deepspeed "(--dp-replicate 2), which a deepspeed export does not set up" -- export "$hybrid_plan" --to deepspeed
bad export-missing-plan-file "plan file" -- export "$data/does-not-exist.json" --to deepspeed
deepspeed_pipeline_plan=$scratch/deepspeed-pipeline-plan.json
"$tessera" plan --model gpt2 --gpus 8 --global-batch 64 --top 1 --runtime deepspeed --pp 2 --output "$deepspeed_pipeline_plan" >/dev/null 2>&1 </dev/null
bad export-deepspeed-pipeline-engine "the plan counts DeepSpeed's pipeline engine, which runs a Megatron-DeepSpeed PipelineModule that no exported script or config sets up; plan again with --runtime deepspeed --plugin low_level_zero (its ZeRO-3), or --runtime colossalai" -- export "$deepspeed_pipeline_plan" --to deepspeed
bad export-colossalai-torchtitan "--to torchtitan: the plan counts colossalai's model states, not torchtitan's FSDP2; plan again with --runtime torchtitan" -- export "$plan_file" --to torchtitan
torchtitan_plan=$scratch/torchtitan-plan.json
"$tessera" plan --model gpt2 --gpus 8 --global-batch 64 --top 1 --runtime torchtitan --output "$torchtitan_plan" >/dev/null 2>&1 </dev/null
bad export-torchtitan-not-a-flavor "gpt2 has a block unlike Llama's (its family, MLP, residual or dropout), which torchtitan's llama3 model does not build; plan again with --runtime colossalai and export that --to colossalai" -- export "$torchtitan_plan" --to torchtitan
bad plan-torchtitan-one-gpu-per-replica "--dp-replicate 8 under --runtime torchtitan leaves one GPU per replica, which torchtitan runs as DDP (not modelled); use --dp-replicate 4 or less" -- plan --model gpt2 --gpus 8 --global-batch 64 --runtime torchtitan --dp-replicate 8 --output "$scratch/never.json"
bad estimate-torchtitan-one-shard "--runtime torchtitan shards over 2 ranks or more per replica" -- estimate --model gpt2 --runtime torchtitan --dp 2 --dp-replicate 2
# tessera train --plan with --gpu: what the GPU step does not run is refused as the plan's setting, before any device.
bad train-gpu-fp8-plan "--plan $fp8_plan: --runtime megatron: the engine keeps ColossalAI's model states" -- train --plan "$fp8_plan" --gpu h100-80g --out "$scratch/never"
bad train-gpu-replicate-plan "--plan $hybrid_plan: --dp-replicate 2: the engine shards over every data-parallel rank" -- train --plan "$hybrid_plan" --gpu h100-80g --out "$scratch/never"
bad train-gpu-dry-run "--dry-run replays the CPU engine's allocations" -- train --gpu h100-80g --dry-run --out "$scratch/never"
bad train-gpu-device-memory "--device-memory 1.00 MiB: the plan needs" -- train --gpu h100-80g --device-memory 1 --out "$scratch/never"
bad export-malformed-plan-file "not valid JSON" -- export "$data/malformed.json" --to deepspeed
bad export-not-a-plan-file "not a plan file" -- export "$data/unknown-model-type.json" --to perfetto
bad export-plan-out-of-range "--plan 99" -- export "$plan_file" --to colossalai --plan 99
bad export-plan-zero "--plan" -- export "$plan_file" --to colossalai --plan 0
bad export-unknown-target "--to" -- export "$plan_file" --to bogus
bad export-missing-target "--to" -- export "$plan_file"
bad export-output-in-missing-directory "--output" -- export "$plan_file" --to deepspeed --output "$scratch/no/such/dir/ds_config.json"

# The good path: exit 0, JSON of schema 1, nothing on stderr.
cases=$((cases + 1))
code=0
"$tessera" estimate --model gpt2 --format json >"$out" 2>"$err" </dev/null || code=$?
if [ "$code" -ne 0 ]; then
  fail good-json "exit code $code, expected 0" "estimate --model gpt2 --format json" "$code"
elif [ -s "$err" ]; then
  fail good-json "printed on stderr" "estimate --model gpt2 --format json" "$code"
elif ! command -v python3 >/dev/null 2>&1; then
  echo "ok   [good-json] exit 0 (python3 not found: JSON not checked)"
elif ! python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["schema"]==1' <"$out"; then
  fail good-json "stdout is not JSON with \"schema\": 1" "estimate --model gpt2 --format json" "$code"
else
  echo "ok   [good-json] exit 0, JSON of schema 1"
fi

# A good export: the DeepSpeed config on stdout parses and carries the batch.
cases=$((cases + 1))
code=0
"$tessera" export "$plan_file" --to deepspeed >"$out" 2>"$err" </dev/null || code=$?
if [ "$code" -ne 0 ]; then
  fail good-export "exit code $code, expected 0" "export $plan_file --to deepspeed" "$code"
elif [ -s "$err" ]; then
  fail good-export "printed on stderr" "export $plan_file --to deepspeed" "$code"
elif ! command -v python3 >/dev/null 2>&1; then
  echo "ok   [good-export] exit 0 (python3 not found: JSON not checked)"
elif ! python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["train_batch_size"]==64' <"$out"; then
  fail good-export "stdout is not a ds_config.json with train_batch_size 64" "export $plan_file --to deepspeed" "$code"
else
  echo "ok   [good-export] exit 0, ds_config.json with train_batch_size 64"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures of $cases cases failed" >&2
  exit 1
fi
echo "all $cases cases passed"
