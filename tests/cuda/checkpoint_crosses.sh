# shellcheck shell=bash
# Checkpoints crossing between the engines, for the GPU checkpoint scripts
# (zero_checkpoint_gpu.sh, pipeline_checkpoint_gpu.sh), sourced after
# parallel/setup.sh. Reads: tessera, work, gpu, small (the options every run
# takes); counts failures in `failures`.

# crosses RANKS LABEL FILE OPTIONS...: both directions on RANKS ranks; FILE: a checkpoint file the first run must have written.
crosses() {
  local ranks=$1 label=$2 file=$3
  shift 3
  for direction in gpu-cpu cpu-gpu; do
    first=(--gpu "$gpu"); second=(--gpu cpu)
    [[ $direction == cpu-gpu ]] && { first=(--gpu cpu); second=(--gpu "$gpu"); }
    out="$work/${label// /-}-$direction"
    if ! mpi "$ranks" "$tessera" train "${small[@]}" "$@" "${first[@]}" --steps 2 --out "$out" >"$out.log" 2>&1; then
      echo "FAILED: $label $direction, the first 2 steps:"; tail -n 3 "$out.log"; failures=$((failures + 1)); continue
    fi
    if [[ ! -f $out/checkpoint/$file ]]; then
      echo "FAILED: $label $direction: no $file in $out/checkpoint"; failures=$((failures + 1)); continue
    fi
    if ! mpi "$ranks" "$tessera" train "${small[@]}" "$@" "${second[@]}" --steps 4 --resume --out "$out" >"$out.resumed.log" 2>&1 ||
       ! grep -q "trained steps 3-4" "$out.resumed.log"; then
      echo "FAILED: $label $direction, resumed to step 4:"; tail -n 3 "$out.resumed.log"; failures=$((failures + 1)); continue
    fi
    echo "ok: $label $direction: $(grep 'trained steps' "$out.resumed.log")"
  done
}
