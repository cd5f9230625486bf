# shellcheck shell=bash
# tools/gpu-check --prepare DIR (sourced by tools/gpu-check): builds the
# programs tools/gpu-check runs on this machine and packs them, with the
# libraries a bare GPU machine may lack, into DIR/programs.tar.gz, beside
# DIR/prepared.json (the commit, the toolkit, what the GPU machine must have).
# On the GPU machine `TESSERA_GPU_PREBUILT=1 TESSERA_GPU_BUILD_DIR=DIR
# tools/gpu-check` unpacks and runs them: no minutes spent building there.
# What a device call carries, the working tree and DIR together, must stay
# under 64 MiB (/work/.library/device/README.md, "Limits"); prepare fails,
# saying by how much, where it would not.

carry_limit_bytes=$((64 * 1024 * 1024))

# prepare_programs DIR: the above; the build in TESSERA_GPU_BUILD_DIR (default build-gpu).
prepare_programs() {
  local dir=$1 build_dir=${TESSERA_GPU_BUILD_DIR:-build-gpu} staging program
  if ! build_programs "$build_dir"; then
    echo "tools/gpu-check: --prepare: building in $build_dir failed (log above)" >&2
    return 1
  fi
  # The lent GPUs are H100s and H200s (sm_90): kernels built for another architecture would not load there
  # (the top-level CMakeLists.txt builds for 90 unless the cache names others).
  local architectures
  architectures=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
  if ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$build_dir/CMakeCache.txt" ||
     ! [[ -z $architectures || ";$architectures;" == *";90;"* || ";$architectures;" == *";90a;"* ]]; then
    echo "tools/gpu-check: --prepare: $build_dir is not a Release build for sm_90; configure it with -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 or name another TESSERA_GPU_BUILD_DIR" >&2
    return 2
  fi
  for program in "${gpu_check_required_programs[@]}"; do
    if [ ! -x "$build_dir/$program" ]; then
      echo "tools/gpu-check: --prepare: $build_dir has no $program (is TESSERA_CUDA ON there?)" >&2
      return 1
    fi
  done
  staging=$(mktemp -d)
  local programs=()
  for program in "${gpu_check_required_programs[@]}" "${gpu_check_optional_programs[@]}"; do
    if [ -x "$build_dir/$program" ]; then
      mkdir -p "$staging/$(dirname "$program")"
      cp "$build_dir/$program" "$staging/$program"
      programs+=("$program")
    fi
  done
  local carried soname path
  if ! carried=$(cd "$staging" && carried_libraries "${programs[@]}"); then rm -rf "$staging"; return 1; fi
  mkdir -p "$staging/lib"
  while read -r soname path; do
    if [ -n "$soname" ]; then cp -L "$path" "$staging/lib/$soname"; fi
  done <<<"$carried"
  mkdir -p "$dir"
  rm -f "$dir/programs.tar.gz"
  tar -C "$staging" -czf "$dir/programs.tar.gz" .
  local device_needs
  device_needs=$(cd "$staging" && device_libraries "${programs[@]}")
  python3 - "$dir/prepared.json" "$build_dir" "${programs[*]}" "$(ls "$staging/lib")" "$device_needs" <<'PY'
import json, subprocess, sys, datetime
out, build_dir, programs, carried, device = sys.argv[1:]
def run(*command):
    try:
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
cache = dict(line.split("=", 1) for line in open(f"{build_dir}/CMakeCache.txt") if "=" in line and not line.startswith(("#", "//")))
dirty = run("git", "status", "--porcelain", "--untracked-files=no")
json.dump({
    "commit": run("git", "rev-parse", "--short", "HEAD") + ("+changes" if dirty not in ("", "unknown") else ""),
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "nvcc": run("nvcc", "--version").splitlines()[-1],
    "cuda_architectures": cache.get("CMAKE_CUDA_ARCHITECTURES:STRING", "90 (the top-level CMakeLists.txt's default)"),
    "programs": programs.split(),
    "carried_libraries": carried.split(),
    "device_libraries": device.split(),
}, open(out, "w"), indent=2)
open(out, "a").write("\n")
PY
  echo "tools/gpu-check: $dir: carries $(ls "$staging/lib" | tr '\n' ' ')and needs from the GPU machine $(tr '\n' ' ' <<<"$device_needs")(its CUDA toolkit's or PyTorch's nvidia wheels)"
  rm -rf "$staging"
  check_carry_size "$dir" "$(tree_bytes)"
}

# tree_bytes: the bytes of the working tree a device call carries: tracked
# files and untracked ones git does not ignore (shared/ among them, where the
# checkout has one).
tree_bytes() {
  git ls-files --cached --others --exclude-standard -z | du --files0-from=- -cb 2>/dev/null | tail -n 1 | cut -f1
}

# check_carry_size DIR TREE_BYTES: prints DIR's size, the tree's and their sum
# against the carry limit; fails where the sum is over it.
check_carry_size() {
  local dir=$1 tree=$2 folder total
  folder=$(du -sb "$dir" | cut -f1)
  total=$((folder + tree))
  echo "tools/gpu-check: $dir: $(mib "$folder") MiB, the working tree $(mib "$tree") MiB: $(mib "$total") of the $(mib "$carry_limit_bytes") MiB a device call carries"
  if [ "$total" -gt "$carry_limit_bytes" ]; then
    echo "tools/gpu-check: --prepare: $(mib $((total - carry_limit_bytes))) MiB over what a device call carries; leave programs out of tools/gpu_check/programs.sh or untracked files out of the tree" >&2
    return 1
  fi
}

mib() {
  awk -v bytes="$1" 'BEGIN {printf "%.1f", bytes / 1048576}'
}
