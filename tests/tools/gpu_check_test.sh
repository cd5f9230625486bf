#!/usr/bin/env bash
# tools/gpu-check without a GPU: its stages' order, budget and skip lines, and
# the report it leaves, run by the real script against stand-ins
# (gpu_check_fakes.sh: a fake nvidia-smi, mpirun, compute-sanitizer and
# prepared programs); its parts (tools/gpu_check/) on their own.
# Usage: gpu_check_test.sh CASE, one of:
#   list       --list's order: the kernels, then the GPU step, the one-GPU
#              training runs, the sanitizers, the runs on several GPUs, PyTorch
#   inputs     bad input: one line, exit 2; no GPU: one line, exit 77
#   run        a whole run on one fake GPU: every stage's state, the skip lines,
#              the report's keys, its copy and the logs in $OUT
#   kill       killed while the GPU step hangs: the report is valid JSON and
#              says what finished, what was running, what was never reached
#   several    the stages of several GPUs on 4 fake ones: each ran, on the ranks
#              and with the options its layout names
#   budget     a budget that fits only the cheapest stages: the others skipped
#              with one line each, later cheaper ones still run
#   stages     tools/gpu_check/stages.sh alone: skip reasons, states, a stage
#              stopped at 3 times its expected seconds or at the budget's end
#   libraries  tools/gpu_check/libraries.sh: what is carried, and a missing
#              library found in a search folder, among the carried, or nowhere
#   carry_size tools/gpu_check/prepare.sh's size check against the 64 MiB a
#              device call carries, and the working tree's bytes
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/tests/tools/gpu_check_fakes.sh"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() {
  echo "FAIL [$case]: $*" >&2
  failures=$((failures + 1))
}
expect_line() {  # expect_line FILE REGEX
  grep -Eq -- "$2" "$1" || fail "no line matching '$2' in: $(cat "$1")"
}
# json FILE EXPRESSION: EXPRESSION (Python, over the document d) printed.
json() {
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
expect_json() {  # expect_json FILE EXPRESSION EXPECTED
  local got
  got=$(json "$1" "$2" 2>&1)
  [ "$got" = "$3" ] || fail "$2 is '$got', expected '$3'"
}

# The fake machine in $scratch/machine, and the environment that makes tools/gpu-check use it.
prepare_machine() {
  fake_gpu_machine "$scratch/machine"
  mkdir -p "$scratch/out" "$scratch/reports"
  fake_env=(PATH="$scratch/machine/bin:$PATH" TESSERA_GPU_PREBUILT=1 TESSERA_GPU_BUILD_DIR="$scratch/machine/build"
            TESSERA_GPU_CHECK_REPORT_DIR="$scratch/reports" OUT="$scratch/out")
}
# gpu_check ENV...: the real tools/gpu-check on the fake machine (stdout and stderr in $scratch/output).
gpu_check() {
  env "${fake_env[@]}" "$@" "$repo/tools/gpu-check" >"$scratch/output" 2>&1
}
report() {
  ls "$scratch"/reports/*-nvidia-h100-80gb-hbm3.json
}
# stage_field NAME FIELD: the report's FIELD of stage NAME.
stage_field() {
  json "$(report)" "[s['$2'] for s in d['stages'] if s['name'] == '$1'][0]"
}

case=${1:-}
case $case in
  list)
    "$repo/tools/gpu-check" --list >"$scratch/output" 2>&1 || fail "--list exited $?"
    mapfile -t names < <(awk 'NR > 1 {print $1}' "$scratch/output")
    position() { local i; for i in "${!names[@]}"; do [ "${names[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo 999; }
    [ "${names[0]:-}" = kernels ] || fail "the first stage is '${names[0]:-}', not kernels"
    [ "${names[1]:-}" = training_step ] || fail "the second stage is '${names[1]:-}', not training_step"
    for name in engine_training engine_training_plan engine_training_recompute; do
      [ "$(position "$name")" -lt "$(position memcheck)" ] || fail "$name comes after memcheck"
    done
    [ "$(position memcheck)" -lt "$(position racecheck)" ] || fail "racecheck comes before memcheck"
    several=$(awk 'NR > 1 && $5 ~ /^GPUs/ {print $1}' "$scratch/output")
    [ -n "$several" ] || fail "no stage needs several GPUs"
    for name in $several; do
      [ "$(position "$name")" -gt "$(position racecheck)" ] || fail "$name (several GPUs) comes before the sanitizers"
      [ "$(position "$name")" -lt "$(position pytorch)" ] || fail "$name (several GPUs) comes after pytorch"
    done
    [ "$(awk 'NR > 1 {last = $1} END {print last}' "$scratch/output")" = pytorch_memory ] || fail "PyTorch's stages are not last"
    ;;
  inputs)
    check_refused() {  # check_refused WHAT EXPECTED_EXIT REGEX COMMAND...
      local what=$1 expected=$2 regex=$3 code=0
      shift 3
      "$@" >"$scratch/stdout" 2>"$scratch/stderr" || code=$?
      [ "$code" -eq "$expected" ] || fail "$what: exit $code, expected $expected"
      local lines
      lines=$(cat "$scratch/stdout" "$scratch/stderr" | wc -l)
      [ "$lines" -eq 1 ] || fail "$what: $lines lines, expected 1: $(cat "$scratch/stdout" "$scratch/stderr")"
      expect_line "$scratch/stderr" "$regex"
    }
    check_refused budget 2 'TESSERA_GPU_CHECK_BUDGET=ten: give the seconds' env TESSERA_GPU_CHECK_BUDGET=ten "$repo/tools/gpu-check"
    check_refused "zero budget" 2 'TESSERA_GPU_CHECK_BUDGET=0' env TESSERA_GPU_CHECK_BUDGET=0 "$repo/tools/gpu-check"
    check_refused stages 2 "TESSERA_GPU_CHECK_STAGES: no stage 'kernel'; the stages: kernels,training_step," \
      env TESSERA_GPU_CHECK_STAGES=kernel "$repo/tools/gpu-check"
    check_refused argument 2 "unknown argument '--budget'" "$repo/tools/gpu-check" --budget 60
    check_refused prepare 2 '--prepare takes one folder' "$repo/tools/gpu-check" --prepare
    mkdir -p "$scratch/machine/bin"
    printf '#!/usr/bin/env bash\nexit 9\n' >"$scratch/machine/bin/nvidia-smi"
    chmod +x "$scratch/machine/bin/nvidia-smi"
    code=0
    env PATH="$scratch/machine/bin:$PATH" "$repo/tools/gpu-check" >"$scratch/stdout" 2>&1 || code=$?
    [ "$code" -eq 77 ] || fail "without a GPU: exit $code, expected 77"
    expect_line "$scratch/stdout" '^tools/gpu-check: no NVIDIA GPU on this machine'
    ;;
  run)
    prepare_machine
    gpu_check || fail "exit $?, expected 0: $(tail -n 20 "$scratch/output")"
    out=$(report)
    expect_json "$out" "d['finished']" True
    expect_json "$out" "d['commit']" 0123abc  # the prepared programs', not the tree's
    expect_json "$out" "d['environment']['prepared']['commit']" 0123abc
    expect_json "$out" "d['budget']['seconds']" 540
    expect_json "$out" "d['environment']['gpus']" 1
    # The device query loaded the library carried beside it, which only the lookup puts on the loader's path.
    expect_json "$out" "'libgpucheckcarried.so.1' in d['environment']['libraries']" True
    expect_json "$out" "d['environment']['libraries_missing']" "[]"
    # Every stage of --list is in the report, in that order.
    "$repo/tools/gpu-check" --list | awk 'NR > 1 {print $1}' >"$scratch/listed"
    json "$out" "'\n'.join(s['name'] for s in d['stages'])" >"$scratch/reported"
    diff "$scratch/listed" "$scratch/reported" >/dev/null || fail "the report's stages differ from --list's: $(diff "$scratch/listed" "$scratch/reported")"
    # The one-GPU stages ran (mpirun and compute-sanitizer are the fakes'); the others say why not.
    for name in kernels training_step checkpoint_interop gemini_one_gpu fsdp_one_gpu engine_training engine_training_plan \
                engine_training_recompute engine_training_fsdp memcheck racecheck gemini_checkpoint_interop fsdp_checkpoint_interop; do
      [ "$(stage_field "$name" state)" = passed ] || fail "$name: $(stage_field "$name" state) ($(stage_field "$name" detail))"
    done
    for name in nccl_ranks engine_training_ddp zero_checkpoint_interop; do
      [ "$(stage_field "$name" state)" = skipped ] || fail "$name: $(stage_field "$name" state), expected skipped on one GPU"
      expect_line "$scratch/output" "^tools/gpu-check: skipped $name: needs 2 GPUs; this machine has 1$"
    done
    for name in hybrid_zero_ranks pipeline_four_ranks engine_training_tp_zero context_tensor_parallel_ranks engine_training_tp_cp engine_training_pp_cp; do
      expect_line "$scratch/output" "^tools/gpu-check: skipped $name: needs 4 GPUs; this machine has 1$"
    done
    if ! python3 -c 'import torch, transformers' 2>/dev/null; then
      expect_line "$scratch/output" '^tools/gpu-check: skipped pytorch: needs python3 with torch and transformers$'
    fi
    # The report's keys as before the budget, with what the stages measured and "not run: <why>" where they did not run.
    expect_json "$out" "d['kernel_tests']['tests']" 3
    expect_json "$out" "[r['test'] for r in d['kernel_tests']['results']]" \
      "['ElementwiseOnGpu.AdamWMatchesCpuOptimizer', 'GptTrainingOnGpu.TwoAccumulatedMicroBatchesMatchTheCpuEngine', 'RecomputeOnGpu.SameLossAndGradientsWithALowerActivationPeak']"
    expect_json "$out" "d['gradient_accumulation']['measured']" "{'max_error loss': '0.000001'}"
    expect_json "$out" "d['recompute']['measured']" "{'activation_peak full': '1024'}"
    expect_json "$out" "d['compute_sanitizer']" "{'memcheck': 'passed', 'racecheck': 'passed'}"
    expect_json "$out" "d['gemini_one_gpu']" 'passed on 1 ranks'
    expect_json "$out" "d['gemini_one_gpu_errors']" "['rank 0: gradients relative error 1e-07']"
    expect_json "$out" "d['nccl_ranks']" 'not run: needs 2 GPUs; this machine has 1'
    expect_json "$out" "d['engine_training']['verdict']" 'passed on 1 rank(s)'
    expect_json "$out" "d['engine_training']['metrics']" "{'loss': [10.9]}"
    expect_json "$out" "d['engine_training']['planner_estimate']" "{'schema': 1}"
    expect_json "$out" "d['engine_training_plan']['compare']" "{'categories': []}"
    expect_json "$out" "d['engine_training_ddp']" "{'verdict': 'not run: needs 2 GPUs; this machine has 1'}"
    expect_json "$out" "d['checkpoint_interop']" passed
    expect_json "$out" "d['gemini_checkpoint_interop']" 'passed: 8 runs; skipped: 2 ranks need 2 GPUs; this machine has 1'
    expect_json "$out" "d['pipeline_checkpoint_interop']" 'not run: needs 2 GPUs; this machine has 1'
    # tessera ran with the planner's H100 profile and the tree's data/ (its own build named another tree's).
    expect_line "$scratch/machine/tessera-calls" "^train --model gpt2 --precision bf16 --micro-batch 8 --seq 1024 --gpu h100-80g --steps 20 --out .*/engine_training TESSERA_DATA_DIR=$repo/data$"
    # $OUT: the report as written, and the stages' logs.
    cmp -s "$out" "$scratch/out/$(basename "$out")" || fail "\$OUT's report differs from $out"
    logs="$scratch/out/$(basename "${out%.json}")-logs.tar.gz"
    tar -tzf "$logs" >"$scratch/logs" 2>&1
    grep -qx 'kernels.log' "$scratch/logs" || fail "no kernels.log in $logs: $(cat "$scratch/logs")"
    [ "$(find "$scratch/out" -type f | wc -l)" -le 8 ] || fail "more than the 8 files a device call brings back in \$OUT"
    ;;
  kill)
    prepare_machine
    # In a process group of its own, killed whole as the device call kills its command.
    setsid env "${fake_env[@]}" FAKE_HANG=training "$repo/tools/gpu-check" >"$scratch/output" 2>&1 &
    pid=$!
    for _ in $(seq 100); do [ -s "$scratch/machine/hanging" ] && break; sleep 0.1; done
    [ -s "$scratch/machine/hanging" ] || fail "the GPU step's tests never started: $(cat "$scratch/output")"
    kill -KILL -- -"$pid"
    kill -KILL "$(cat "$scratch/machine/hanging")"  # timeout ran it in a process group of its own
    { wait "$pid"; } 2>/dev/null
    out=$(report)
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$out" || fail "$out is not JSON after the kill"
    expect_json "$out" "d['finished']" False
    expect_json "$out" "[s['state'] for s in d['stages']][:3]" "['passed', 'running', 'not reached']"
    expect_json "$out" "d['kernel_tests']['tests']" 1
    expect_json "$out" "d['gradient_accumulation']" 'not finished: it was running when the check stopped'
    expect_json "$out" "d['engine_training']['verdict']" 'not run: the check stopped before this stage'
    cmp -s "$out" "$scratch/out/$(basename "$out")" || fail "\$OUT's report differs from $out"
    ;;
  several)
    prepare_machine
    several=nccl_ranks,ddp_ranks,zero_ranks,gemini_ranks,fsdp_ranks,tensor_parallel_ranks,hybrid_zero_ranks,pipeline_ranks,pipeline_four_ranks
    several+=,engine_training_ddp,engine_training_zero,engine_training_tp,engine_training_tp_zero,engine_training_pp,engine_training_pp_zero
    several+=,engine_training_pp_interleaved,engine_training_hybrid_offload,engine_training_fsdp,context_tensor_parallel_ranks,engine_training_tp_cp
    several+=,engine_training_pp_cp
    gpu_check FAKE_GPUS=4 TESSERA_GPU_CHECK_STAGES=$several || fail "exit $?, expected 0: $(tail -n 20 "$scratch/output")"
    out=$(report)
    for name in ${several//,/ }; do
      [ "$(stage_field "$name" state)" = passed ] || fail "$name: $(stage_field "$name" state) ($(stage_field "$name" detail))"
    done
    expect_json "$out" "d['ddp_ranks']" 'passed on 4 ranks'
    expect_json "$out" "d['tensor_parallel_ranks']" 'passed on 2 ranks'
    expect_json "$out" "d['engine_training_fsdp']['verdict']" 'passed on 4 rank(s)'
    expect_json "$out" "d['kernel_tests']['tests']" 0
    expect_line "$scratch/machine/tessera-calls" "^train .* --plugin hybrid_parallel --tp 2 --dp 2 --zero-stage 1 --gpu h100-80g --steps 20 --out .*/engine_training_tp_zero "
    expect_line "$scratch/machine/tessera-calls" "^train .* --plugin hybrid_parallel --pp 2 --pp-schedule interleaved --model-chunks 2 --micro-batches 4 --dp 2 --gpu h100-80g --steps 20 "
    expect_line "$scratch/machine/tessera-calls" "^train .* --tp 2 --dp 2 --zero-stage 1 --cpu-offload --gpu h100-80g --steps 20 --out .*/engine_training_hybrid_offload "
    expect_json "$out" "d['context_tensor_parallel_ranks']" 'passed on 4 ranks'
    expect_line "$scratch/machine/tessera-calls" "^train .* --plugin hybrid_parallel --tp 2 --cp 2 --dp 1 --gpu h100-80g --steps 20 --out .*/engine_training_tp_cp "
    expect_line "$scratch/machine/tessera-calls" "^train .* --pp 2 --pp-schedule 1f1b --micro-batches 4 --cp 2 --dp 1 --gpu h100-80g --steps 20 --out .*/engine_training_pp_cp "
    ;;
  budget)
    prepare_machine
    cheapest=$("$repo/tools/gpu-check" --list | awk 'NR > 1 {print $2}' | sort -n | head -n 1)
    # Room for the cheapest stages and for the fakes' own seconds, not for the next dearer ones.
    budget=$((cheapest + 14))
    gpu_check TESSERA_GPU_CHECK_BUDGET=$budget || fail "exit $?, expected 0: $(tail -n 20 "$scratch/output")"
    out=$(report)
    "$repo/tools/gpu-check" --list | awk 'NR > 1 && $5 == "GPU" {print $1, $2}' >"$scratch/one_gpu"
    ran=0
    while read -r name expected; do
      state=$(stage_field "$name" state)
      if [ "$expected" -gt "$budget" ]; then
        [ "$state" = skipped ] || fail "$name (expected $expected s) $state within $budget s"
        expect_line "$scratch/output" "^tools/gpu-check: skipped $name: (would not fit: expected $expected s, [0-9]+ s of the budget left \(TESSERA_GPU_CHECK_BUDGET\)|needs .*)$"
      elif [ "$expected" -eq "$cheapest" ] && [ "$state" = passed ]; then
        ran=$((ran + 1))
      fi
    done <"$scratch/one_gpu"
    [ "$ran" -ge 2 ] || fail "fewer than 2 of the cheapest stages ran after dearer ones were skipped"
    [ "$(stage_field kernels state)" = skipped ] || fail "kernels (the first stage) ran within $budget s"
    ;;
  stages)
    work=$scratch
    gpus=1
    source "$repo/tools/gpu_check/stages.sh"
    write_report() { reports=$((reports + 1)); }
    need_thing() { echo "needs a thing, which this machine does not have"; return 1; }
    sleeper() { timeout "$(stage_left)" sleep 30; }
    not_run() { return 77; }
    mini_stages() {
      stage first       1 1 -     true
      stage failing     1 1 -     false
      stage two_gpus    1 2 -     true
      stage needs_thing 1 1 thing true
      stage declined    1 1 -     not_run
      stage sleeper     1 1 -     sleeper
      stage too_dear   90 1 -     true
      stage last        1 1 -     true
    }
    run_mini() {  # run_mini BUDGET SELECTED: the mini stages, their output in $scratch/mini
      reports=0 stages_failed=0 gpu_check_budget_s=$((SECONDS + $1)) selected_stages=$2
      stage_list_plan mini_stages
      stage_run_all mini_stages >"$scratch/mini"
    }
    states() { awk -F'\t' '{state[$1] = $2 " " $3} END {for (n in state) print n ": " state[n]}' "$work/records.tsv" | sort; }
    run_mini 60 ""
    expect_line "$scratch/mini" '^tools/gpu-check: skipped two_gpus: needs 2 GPUs; this machine has 1$'
    expect_line "$scratch/mini" '^tools/gpu-check: skipped needs_thing: needs a thing, which this machine does not have$'
    expect_line "$scratch/mini" '^tools/gpu-check: sleeper \(expected 1 s, stopped after 3 s; [0-9]+ s of the budget left\)$'
    expect_line "$scratch/mini" '^tools/gpu-check: skipped too_dear: would not fit: expected 90 s, [0-9]+ s of the budget left \(TESSERA_GPU_CHECK_BUDGET\)$'
    [ "$(cut -f1 "$work/plan.tsv" | paste -sd' ')" = "first failing two_gpus needs_thing declined sleeper too_dear last" ] ||
      fail "plan.tsv: $(cat "$work/plan.tsv")"
    # A report before and after each stage that ran (skips take no time: the next report carries them).
    [ "$(grep -vc '	skipped	' "$work/records.tsv")" -eq "$reports" ] || fail "$reports reports for $(grep -vc '	skipped	' "$work/records.tsv") records of stages that ran"
    [ "$(states | tr '\n' ';')" = "declined: not run 0;failing: failed 0;first: passed 0;last: passed 0;needs_thing: skipped 0;sleeper: stopped 3;too_dear: skipped 0;two_gpus: skipped 0;" ] ||
      [ "$(states | tr '\n' ';')" = "declined: not run 0;failing: failed 0;first: passed 0;last: passed 0;needs_thing: skipped 0;sleeper: stopped 4;too_dear: skipped 0;two_gpus: skipped 0;" ] ||
      fail "states (the sleeper stopped after 3 s, 4 where a second's tick fell in): $(states | tr '\n' ';')"
    [ "$stages_failed" -eq 1 ] || fail "stages_failed is $stages_failed after a failed and a stopped stage"
    # The budget's end stops a stage before 3 times its expected seconds do (2 s, 1 where a second's tick fell in before).
    run_mini 2 "sleeper,last"
    expect_line "$scratch/mini" '^tools/gpu-check: sleeper \(expected 1 s, stopped after ([12]) s; \1 s of the budget left\)$'
    expect_line "$scratch/mini" '^tools/gpu-check: skipped first: not selected \(TESSERA_GPU_CHECK_STAGES=sleeper,last\)$'
    expect_line "$scratch/mini" '^tools/gpu-check: skipped last: would not fit: expected 1 s, 0 s of the budget left \(TESSERA_GPU_CHECK_BUDGET\)$'
    grep -Eq "^sleeper	stopped	[123]	" "$work/records.tsv" || fail "the sleeper was not stopped at the budget's end: $(cat "$work/records.tsv")"
    ;;
  libraries)
    source "$repo/tools/gpu_check/libraries.sh"
    mkdir -p "$scratch/src" "$scratch/found" "$scratch/carried" "$scratch/none"
    echo 'int fake_answer(void) { return 42; }' >"$scratch/src/fake.c"
    echo 'int fake_answer(void); int main(void) { return fake_answer() == 42 ? 0 : 1; }' >"$scratch/src/main.c"
    cc -shared -fPIC -Wl,-soname,libgpucheckfake.so.1 -o "$scratch/src/libgpucheckfake.so.1" "$scratch/src/fake.c" &&
      cc -o "$scratch/program" "$scratch/src/main.c" "$scratch/src/libgpucheckfake.so.1" || fail "cc could not build the stand-in"
    # Here the program finds it through LD_LIBRARY_PATH: carried, with its path; libc is every machine's.
    carried=$(LD_LIBRARY_PATH="$scratch/src" carried_libraries "$scratch/program")
    [ "$carried" = "libgpucheckfake.so.1 $scratch/src/libgpucheckfake.so.1" ] || fail "carried: '$carried'"
    [ -z "$(LD_LIBRARY_PATH="$scratch/src" device_libraries "$scratch/program")" ] || fail "the stand-in is not a CUDA library"
    carried_libraries "$scratch/program" 2>"$scratch/stderr" && fail "carried_libraries passed a library this machine lacks"
    expect_line "$scratch/stderr" 'the programs need libraries this machine does not have: libgpucheckfake.so.1'
    # In a search folder: that folder goes on LD_LIBRARY_PATH.
    cp "$scratch/src/libgpucheckfake.so.1" "$scratch/found/"
    ran=$(export TESSERA_GPU_LIBRARY_PATH="$scratch/none:$scratch/found"
          resolve_libraries "$scratch/links1" "$scratch/carried" "$scratch/program"
          echo "unresolved '$unresolved_libraries'"; "$scratch/program" && echo ran)
    [ "$ran" = "$(printf "unresolved ''\nran")" ] || fail "found in a search folder: $ran"
    # Only among the carried copies: linked into the links folder.
    mv "$scratch/found/libgpucheckfake.so.1" "$scratch/carried/"
    ran=$(resolve_libraries "$scratch/links2" "$scratch/carried" "$scratch/program"
          echo "unresolved '$unresolved_libraries'"; "$scratch/program" && echo ran)
    [ "$ran" = "$(printf "unresolved ''\nran")" ] || fail "carried: $ran"
    [ -L "$scratch/links2/libgpucheckfake.so.1" ] || fail "no link to the carried copy in links2"
    # Nowhere: named.
    unresolved=$(resolve_libraries "$scratch/links3" "$scratch/none" "$scratch/program"; echo "$unresolved_libraries")
    [ "$unresolved" = libgpucheckfake.so.1 ] || fail "missing everywhere: '$unresolved'"
    ;;
  carry_size)
    source "$repo/tools/gpu_check/prepare.sh"
    mkdir -p "$scratch/prepared"
    truncate -s 40M "$scratch/prepared/programs.tar.gz"
    check_carry_size "$scratch/prepared" $((10 * 1024 * 1024)) >"$scratch/output" 2>&1 || fail "40 + 10 MiB refused: $(cat "$scratch/output")"
    expect_line "$scratch/output" ': 40.0 MiB, the working tree 10.0 MiB: 50.0 of the 64.0 MiB a device call carries$'
    truncate -s 60M "$scratch/prepared/programs.tar.gz"
    check_carry_size "$scratch/prepared" $((10 * 1024 * 1024)) >"$scratch/output" 2>&1 && fail "60 + 10 MiB passed"
    expect_line "$scratch/output" '^tools/gpu-check: --prepare: 6.0 MiB over what a device call carries'
    # The tree that travels: tracked and untracked files, not ignored ones.
    mkdir -p "$scratch/tree" && cd "$scratch/tree" && git init -q . &&
      head -c 1000 /dev/zero >tracked && git add tracked && head -c 300 /dev/zero >untracked &&
      echo ignored >.gitignore && head -c 5000 /dev/zero >ignored
    [ "$(tree_bytes)" -eq $((1000 + 300 + 8)) ] || fail "tree_bytes is $(tree_bytes), expected 1308 (tracked, untracked, .gitignore)"
    ;;
  *)
    echo "usage: $0 list|inputs|run|kill|several|budget|stages|libraries|carry_size" >&2
    exit 2 ;;
esac
exit $((failures > 0))
