#!/usr/bin/env bash
# tests/faults/faults.sh TESSERA CASE [N]
#
# Replays the reproducers of the reliability issue against the real binary:
# each case attacks `tessera train` (or another verb) as a user or the machine
# would, then checks that the answer is one clear line with the right exit code
# and that the run directory still resumes to the bytes an uninterrupted run
# ends with. Cases that need strace exit 77 (skipped) where it is missing.
#
# Cases: concurrent crash-during-save aborts signals work-not-lost memory
#        outputs bounded-reads resume-verification lesser kill9 [N runs]
set -uo pipefail
set -m  # background jobs keep SIGINT (a non-interactive shell would ignore it in them)

tessera=$(realpath "$1")
case_name=$2
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
# A case that fails or times out must not leave a training behind it.
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
export OMP_NUM_THREADS=1  # the same thread count in every run: the bytes depend on it

small=(--micro-batch 2 --seq 16)
# In the foreground only: a background job of a function is a subshell, which a signal would reach instead of tessera.
train() { "$tessera" train "${small[@]}" "$@"; }
fail() { echo "FAIL [$case_name]: $*" >&2; exit 1; }

# expect_refusal CODE PATTERN COMMAND...: exit CODE, one line on stderr matching PATTERN.
expect_refusal() {
  local code=$1 pattern=$2
  shift 2
  "$@" >out.txt 2>err.txt
  local got=$?
  [ "$got" -eq "$code" ] || fail "exit $got (expected $code) from: $* -- $(head -c 300 err.txt)"
  [ "$(wc -l <err.txt)" -eq 1 ] || fail "expected one line on stderr from: $* -- got: $(head -c 600 err.txt)"
  grep -qE -e "$pattern" err.txt || fail "stderr of '$*' lacks /$pattern/: $(cat err.txt)"
}

# same_as_uninterrupted DIR STEPS [train options]: DIR's checkpoint equals a fresh run's.
same_as_uninterrupted() {
  local dir=$1 steps=$2
  shift 2
  local reference="reference-$steps-$(echo "$*" | tr -c 'a-z0-9' _)"
  [ -d "$reference" ] || train --steps "$steps" "$@" --out "$reference" >/dev/null || fail "reference run failed"
  cmp -s "$dir/model.safetensors" "$reference/model.safetensors" || fail "$dir: model.safetensors differs from an uninterrupted run"
  cmp -s "$dir/optimizer.safetensors" "$reference/optimizer.safetensors" || fail "$dir: optimizer.safetensors differs from an uninterrupted run"
}

resume_to() {  # resume_to DIR STEPS [options]: continue and check the bytes
  local dir=$1 steps=$2
  shift 2
  train --steps "$steps" "$@" --out "$dir" --resume >/dev/null 2>resume.err || fail "resume of $dir failed: $(cat resume.err)"
  same_as_uninterrupted "$dir" "$steps" "$@"
}

need_strace() { command -v strace >/dev/null || { echo "strace is not installed: skipping $case_name"; exit 77; }; }

case_concurrent() {
  for round in 1 2 3 4 5; do
    rm -rf d
    train --steps 40 --seed 1 --save-every 1 --out d >/dev/null 2>one.err &
    local first=$!
    train --steps 40 --seed 2 --save-every 1 --out d >/dev/null 2>two.err &
    local second=$!
    wait $first; local one=$?
    wait $second; local two=$?
    [ $((one == 0)) -ne $((two == 0)) ] || fail "round $round: exits $one and $two; exactly one run must own d"
    local loser=two.err seed=1
    if [ $one -ne 0 ]; then loser=one.err; seed=2; fi
    grep -qE "in use by another tessera train \(pid [0-9]+\)|holds a checkpoint already" $loser || fail "round $round: $(cat $loser)"
    resume_to d 45 --seed $seed
  done
}

case_crash_during_save() {
  need_strace
  # Every rename of a three-step run with a save after each step, one kill each.
  local renames
  renames=$(strace -f -qq -e trace=rename -o trace.txt "$tessera" train "${small[@]}" --steps 3 --save-every 1 --out probe >/dev/null 2>&1; grep -c 'rename(' trace.txt)
  [ "$renames" -ge 10 ] || fail "counted only $renames renames"
  for ((k = 1; k <= renames; k++)); do
    rm -rf d
    strace -f -qq -o /dev/null -e trace=rename -e inject=rename:signal=KILL:when=$k "$tessera" train "${small[@]}" --steps 3 --save-every 1 --out d >/dev/null 2>&1
    resume_to d 3
  done
}

case_aborts() {
  train --steps 2 --out d >/dev/null || fail "training d"
  local step=d/checkpoints/step-00000002
  cp -r $step saved
  rm $step/model.safetensors && mkdir $step/model.safetensors
  expect_refusal 2 "model.safetensors' is a directory" train --steps 4 --out d --resume
  rm -r $step/model.safetensors && ln -s /dev/zero $step/model.safetensors
  expect_refusal 2 "model.safetensors' is a character device" train --steps 4 --out d --resume
  rm $step/model.safetensors && cp saved/model.safetensors $step/
  if command -v strace >/dev/null; then
    # An I/O error on the first read of the data, then of the checkpoint (-P: only reads of that file).
    head -c 20000 "$source_dir/data/text/kjv-genesis-exodus.txt" >text.txt
    train --steps 2 --data text.txt --out e >/dev/null || fail "training e"
    expect_refusal 2 "--data: cannot read 'text.txt': Input/output error" strace -f -qq -o /dev/null -P "$PWD/text.txt" -e trace=pread64 \
      -e inject=pread64:error=EIO:when=1 "$tessera" train "${small[@]}" --steps 4 --data text.txt --out e --resume
    expect_refusal 2 "cannot read .*model.safetensors': Input/output error" strace -f -qq -o /dev/null -P "$PWD/e/checkpoints/step-00000002/model.safetensors" \
      -e trace=pread64 -e inject=pread64:error=EIO:when=1 "$tessera" train "${small[@]}" --steps 4 --data text.txt --out e --resume
    resume_to e 4 --data text.txt
  fi
  # Out of memory: the pre-flight check sees the address-space limit first.
  expect_refusal 2 "needs .* is usable here \(ulimit -v" bash -c "ulimit -v 2000000; exec '$tessera' train --model gpt2-large --steps 1 --out big"
  resume_to d 4
}

# run_until_signal SIGNAL: a long run stopped by SIGNAL; checks the exit code
# and the one line, and resumes to 5 steps past where it stopped.
run_until_signal() {
  local signal=$1 number=$2
  rm -rf d
  "$tessera" train "${small[@]}" --steps 1000000 --out d >/dev/null 2>err.txt &
  local pid=$!
  sleep 1.5
  kill -s "$signal" $pid
  wait $pid
  local code=$?
  [ $code -eq $((128 + number)) ] || fail "$signal: exit $code (expected $((128 + number))): $(cat err.txt)"
  [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "stopped by SIG$signal after step [0-9]*: the checkpoint in d is at step" err.txt || fail "$signal: $(cat err.txt)"
  local step
  step=$(sed -n 's/.* is at step \([0-9]*\).*/\1/p' err.txt)
  [ -s d/metrics.json ] || fail "$signal: no metrics.json"
  resume_to d $((step + 5))
}

case_signals() {
  run_until_signal INT 2
  run_until_signal TERM 15
  run_until_signal HUP 1
  # SIGPIPE: the reader of the progress lines goes away.
  rm -rf d
  train --steps 1000000 --out d 2>err.txt | head -n 1 >/dev/null
  local code=${PIPESTATUS[0]}
  [ "$code" -eq 141 ] || fail "SIGPIPE: exit $code: $(cat err.txt)"
  local step
  step=$(sed -n 's/.* is at step \([0-9]*\).*/\1/p' err.txt)
  resume_to d $((step + 5))
  # A second signal ends the run at once; the committed checkpoint still resumes.
  rm -rf d
  "$tessera" train "${small[@]}" --steps 1000000 --save-every 50 --out d >/dev/null 2>err.txt &
  local pid=$!
  sleep 1.5
  kill -s TERM $pid
  kill -s TERM $pid
  wait $pid
  code=$?
  [ $code -eq 143 ] || fail "second SIGTERM: exit $code"
  step=$(readlink d/checkpoint | sed 's/.*step-0*//')
  resume_to d $((${step:-0} + 5))
}

case_work_not_lost() {
  expect_refusal 2 "--out must name a directory" train --steps 1 --out ""
  echo x >a-file
  local start=$SECONDS
  expect_refusal 2 "--out: 'a-file/run' |cannot create 'a-file/run'" train --steps 100000 --out a-file/run
  [ $((SECONDS - start)) -lt 20 ] || fail "an unwritable --out was found late"
  ! grep -q "^step" out.txt || fail "trained before finding --out unwritable"
}

case_memory() {
  expect_refusal 2 "--model gpt2-xl needs .* less a reserve of" bash -c "ulimit -v 8000000; exec '$tessera' train --model gpt2-xl --steps 1 --out xl"
  [ ! -e xl/checkpoint ] || fail "a refused run wrote a checkpoint"
}

case_outputs() {
  expect_refusal 2 "not a regular file|only replaces regular files" "$tessera" estimate --model gpt2 --output /dev/full
  [ -c /dev/full ] || fail "/dev/full is no longer a device"
  echo keep >target && ln -s target link
  expect_refusal 2 "not a regular file|only replaces regular files|symbolic link" "$tessera" estimate --model gpt2 --output link
  [ -L link ] && [ "$(cat target)" = keep ] || fail "the link or its target changed"
}

case_bounded_reads() {
  mkfifo fifo
  expect_refusal 2 "character device|not a regular file" timeout 10 "$tessera" estimate --model /dev/zero
  expect_refusal 2 "FIFO|not a regular file" timeout 10 "$tessera" estimate --model fifo
  expect_refusal 2 "--data: '/dev/urandom' is a character device" timeout 10 "$tessera" train --steps 1 --data /dev/urandom --out d1
  expect_refusal 2 "--data: 'fifo' is a FIFO" timeout 10 "$tessera" train --steps 1 --data fifo --out d2
}

case_resume_verification() {
  train --steps 3 --out d >/dev/null && train --steps 3 --seed 7 --out other >/dev/null || fail "training"
  local step=d/checkpoints/step-00000003
  cp -r $step saved
  printf '\x55' | dd of=$step/model.safetensors bs=1 seek=4000 conv=notrunc status=none
  expect_refusal 2 "model.safetensors is damaged" train --steps 5 --out d --resume
  cp saved/model.safetensors $step/ && cp other/checkpoints/step-00000003/optimizer.safetensors $step/
  expect_refusal 2 "optimizer.safetensors is damaged" train --steps 5 --out d --resume
  cp saved/optimizer.safetensors $step/
  head -c 20000 "$source_dir/data/text/kjv-genesis-exodus.txt" | tail -c 10000 >other.txt
  for change in "--precision bf16" "--micro-batch 1 --seq 16" "--micro-batch 2 --seq 8" "--micro-batches 2" "--lr 0.01" "--data other.txt" \
    "--model tiny-llama"; do
    local options=$change
    [[ $change == --micro-batch* ]] || options="$change ${small[*]}"
    # shellcheck disable=SC2086
    expect_refusal 2 "was trained otherwise: .*--allow-changes" "$tessera" train $options --steps 5 --out d --resume
  done
  resume_to d 5
  # A diverging run keeps a checkpoint whose weights are finite: it resumes and trains on.
  rm -rf nan
  expect_refusal 2 "at step [0-9]+; .*lower --lr" train --steps 30 --save-every 1 --lr 1e30 --out nan
  [ -L nan/checkpoint ] || fail "no checkpoint kept"
  python3 - nan/model.safetensors <<'PY' || fail "the kept checkpoint holds weights that are not finite"
import json, math, struct, sys
data = open(sys.argv[1], "rb").read()
length = struct.unpack("<Q", data[:8])[0]
values = struct.unpack("<%df" % ((len(data) - 8 - length) // 4), data[8 + length:])
sys.exit(0 if all(math.isfinite(v) for v in values) else 1)
PY
}

case_lesser() {
  expect_refusal 2 "--steps" timeout 60 "$tessera" train "${small[@]}" --steps 9223372036854775808 --out big
  local models=$source_dir/models
  sed 's/"model_type"/"activation_function": "gelu", "model_type"/' "$models/tiny-gpt2.json" >gelu.json
  expect_refusal 2 "activation_function is 'gelu'" train --model gelu.json --steps 1 --out g
  sed 's/"model_type"/"rope_scaling": {"rope_type": "llama3", "factor": 8.0}, "model_type"/' "$models/tiny-llama.json" >scaled.json
  expect_refusal 2 "rope_scaling asks for 'llama3'" train --model scaled.json --steps 1 --out s
}

# N runs killed at a random moment during --save-every 1: each resumes to the
# bytes of an uninterrupted run.
case_kill9() {
  local runs=${1:-25} steps=30 before_first=0 mid_run=0 mid_save=0 finished=0
  for ((i = 1; i <= runs; i++)); do
    rm -rf d
    "$tessera" train "${small[@]}" --steps $steps --save-every 1 --out d >/dev/null 2>&1 &
    local pid=$!
    sleep "0.$(printf '%03d' $((RANDOM % 700)))"
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    # Where the kill landed: the committed step, and whether a save was under way.
    local committed
    committed=$(readlink d/checkpoint 2>/dev/null | sed 's/.*step-0*//')
    if [ -z "$committed" ]; then ((before_first++)); elif [ "$committed" -eq $steps ]; then ((finished++)); else ((mid_run++)); fi
    compgen -G "d/checkpoints/.staging-*" >/dev/null && ((mid_save++))
    resume_to d $steps
  done
  echo "kill9: $runs runs killed at random moments ($before_first before the first commit, $mid_run mid-run of which $mid_save" \
    "during a save, $finished after the last); every one resumed to the uninterrupted bytes"
}

case "$case_name" in
  concurrent) case_concurrent ;;
  crash-during-save) case_crash_during_save ;;
  aborts) case_aborts ;;
  signals) case_signals ;;
  work-not-lost) case_work_not_lost ;;
  memory) case_memory ;;
  outputs) case_outputs ;;
  bounded-reads) case_bounded_reads ;;
  resume-verification) case_resume_verification ;;
  lesser) case_lesser ;;
  kill9) case_kill9 "${3:-25}" ;;
  *) echo "unknown case '$case_name'" >&2; exit 2 ;;
esac
echo "PASS [$case_name]"
