# shellcheck shell=bash
# tools/gpu-check's stages under a time budget (sourced by tools/gpu-check).
#
# The caller lists its stages in priority order in a function whose every line is
#   stage NAME EXPECTED_S MIN_GPUS NEEDS COMMAND [ARGS...]
# and calls stage_list_plan with it, then stage_run_all with it. A stage runs
# when it is selected, the machine has MIN_GPUS, `need_NEEDS` (a function of
# the caller's that prints what is missing and fails; "-" needs nothing)
# succeeds, and EXPECTED_S fits what is left of the budget; otherwise it is
# skipped with one line saying why, and later, cheaper stages may still
# fit. A running stage is stopped after the smaller
# of stage_overrun_factor times its expected seconds (a hang must not eat the
# stages after it) and what is left of the budget: COMMAND bounds each program
# it starts by `timeout -k 10 "$(stage_left)"`.
# COMMAND returns 0 (passed), 77 (not run: it says why in its own verdict),
# 124 or 137 (stopped at its limit) or anything else (failed).
#
# Every stage's state goes to $work/records.tsv: skipped, or running and then
# how it ended. write_report (the caller's) is called before and after each
# stage that runs (a skip takes no time: the next call carries it), so a run
# killed at any point leaves the report of what finished and what was
# running; $work/plan.tsv holds the plan (name, expected seconds, GPUs, needs,
# command) for the stages never reached.
#
# Reads: work, gpus, gpu_check_budget_s (the budget's end, in bash's SECONDS),
# selected_stages (names separated by commas; empty selects every stage).
# Sets: stages_failed=1 when a stage failed or was stopped.

stage_overrun_factor=3
stages_failed=0

# stage_list_plan STAGES_FUNCTION: writes $work/plan.tsv.
stage_list_plan() {
  : >"$work/plan.tsv"
  stage_mode=list "$1"
}

# stage_run_all STAGES_FUNCTION: runs (or skips) every stage in order.
stage_run_all() {
  : >"$work/records.tsv"
  stage_mode=run "$1"
}

stage() {
  local name=$1 expected_s=$2 min_gpus=$3 needs=$4
  shift 4
  if [ "$stage_mode" = list ]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$expected_s" "$min_gpus" "$needs" "$1" >>"$work/plan.tsv"
    return 0
  fi
  local reason
  reason=$(stage_skip_reason "$name" "$expected_s" "$min_gpus" "$needs")
  if [ -n "$reason" ]; then
    echo "tools/gpu-check: skipped $name: $reason"
    printf '%s\tskipped\t0\t%s\n' "$name" "$reason" >>"$work/records.tsv"
    return 0
  fi
  local left=$((gpu_check_budget_s - SECONDS)) limit=$((expected_s * stage_overrun_factor))
  if [ "$limit" -gt "$left" ]; then limit=$left; fi
  stage_deadline=$((SECONDS + limit))
  stage_limit_s=$limit
  echo "tools/gpu-check: $name (expected $expected_s s, stopped after $limit s; $left s of the budget left)"
  stage_record "$name" running 0 "started with $left s of the budget left, to stop after $limit s"
  local started=$SECONDS status=0
  "$@" || status=$?
  local state=passed detail=""
  case $status in
    0) ;;
    77) state="not run" ;;
    124 | 137) state="stopped"; detail="stopped after $limit s: $stage_overrun_factor times its expected $expected_s s, or what was left of the budget"; stages_failed=1 ;;
    *) state=failed; detail="exit $status"; stages_failed=1 ;;
  esac
  stage_record "$name" "$state" $((SECONDS - started)) "$detail"
}

# stage_skip_reason NAME EXPECTED_S MIN_GPUS NEEDS: why the stage cannot run now, or nothing.
stage_skip_reason() {
  local name=$1 expected_s=$2 min_gpus=$3 needs=$4 left=$((gpu_check_budget_s - SECONDS)) missing
  [ "$left" -lt 0 ] && left=0  # a stage may run up to timeout's 10 s of grace past the budget
  if [ -n "$selected_stages" ] && [[ ",$selected_stages," != *",$name,"* ]]; then
    echo "not selected (TESSERA_GPU_CHECK_STAGES=$selected_stages)"
  elif [ "$gpus" -lt "$min_gpus" ]; then
    echo "needs $min_gpus GPUs; this machine has $gpus"
  elif [ "$needs" != - ] && ! missing=$("need_$needs"); then
    echo "$missing"
  elif [ "$expected_s" -gt "$left" ]; then
    echo "would not fit: expected $expected_s s, $left s of the budget left (TESSERA_GPU_CHECK_BUDGET)"
  fi
}

# stage_left: the seconds until the running stage's stop, at least 1 (for timeout).
stage_left() {
  local left=$((stage_deadline - SECONDS))
  echo $((left > 0 ? left : 1))
}

# stage_stopped STATUS: whether a program's exit status says timeout stopped it.
stage_stopped() {
  [ "$1" -eq 124 ] || [ "$1" -eq 137 ]
}

stage_record() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$work/records.tsv"
  write_report
}
