# shellcheck shell=bash
# The shared libraries of tools/gpu-check's prepared programs (sourced by
# tools/gpu_check/prepare.sh and tools/gpu-check).
#
# Programs built on one machine and run on a GPU machine that has only its
# own image: prepare.sh carries every library they load except the C and C++
# runtimes and the loader (every Linux machine has them) and the CUDA
# libraries too large to carry (cuBLAS 0.5 GB, cuDNN and NCCL 0.2 GB each,
# against the 64 MiB a device call may carry); on the GPU machine
# resolve_libraries finds what its loader misses, the large ones in its CUDA
# toolkit or in python3's nvidia wheels (PyTorch's), the rest among the
# carried copies.

# What every machine has, and what the GPU machine must have (by soname).
system_library_pattern='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so'
device_library_pattern='^(libcublas|libcublasLt|libcudnn[a-z_]*|libnccl)\.so'

# carried_libraries PROGRAM...: "soname path" of each library to carry, one a
# line; fails, naming them, where a library is not found here.
carried_libraries() {
  local listed
  listed=$({ ldd "$@" 2>/dev/null || true; } | awk '$2 == "=>" {print $1, $3}' | sort -u)
  if grep -q ' not$' <<<"$listed"; then
    echo "tools/gpu-check: the programs need libraries this machine does not have: $(grep ' not$' <<<"$listed" | cut -d' ' -f1 | tr '\n' ' ')" >&2
    return 1
  fi
  grep -Ev "$system_library_pattern" <<<"$listed" | grep -Ev "$device_library_pattern" || true
}

# device_libraries PROGRAM...: the sonames the GPU machine must have, one a line.
device_libraries() {
  { ldd "$@" 2>/dev/null || true; } | awk '$2 == "=>" {print $1}' | sort -u | grep -E "$device_library_pattern" || true
}

# library_search_dirs: where resolve_libraries looks, in order: TESSERA_GPU_LIBRARY_PATH
# (colon-separated), the CUDA toolkits' folders, python3's nvidia wheels (nvidia/cudnn/lib,
# nvidia/nccl/lib, CUDA 13's nvidia/cu13/lib).
library_search_dirs() {
  local dir
  tr ':' '\n' <<<"${TESSERA_GPU_LIBRARY_PATH:-}"
  printf '%s\n' /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/targets/x86_64-linux/lib
  dir=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null) || return 0
  printf '%s\n' "$dir"/nvidia/*/lib
}

# resolve_libraries LINKS CARRIED PROGRAM...: for each library the programs'
# loader misses, puts the first search folder that has it on LD_LIBRARY_PATH
# (the whole folder: cuDNN opens its sub-libraries beside itself), or else
# links the carried copy in CARRIED into LINKS (only the missing ones, so the
# machine's own libraries win); again for what those need in turn. Exports
# LD_LIBRARY_PATH, so call it in the shell that runs the programs; sets
# unresolved_libraries to the sonames still missing, one a line.
resolve_libraries() {
  local links=$1 carried=$2 missing lib dir found _ search
  shift 2
  search=$(library_search_dirs)
  mkdir -p "$links"
  export LD_LIBRARY_PATH="$links${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for _ in 1 2 3 4 5 6; do  # each round finds what the last round's libraries need
    missing=$(libraries_missing "$@")
    if [ -z "$missing" ]; then break; fi
    found=0
    for lib in $missing; do
      dir=$(while read -r candidate; do
              if [ -n "$candidate" ] && [ -e "$candidate/$lib" ]; then echo "$candidate"; break; fi
            done <<<"$search")
      if [ -n "$dir" ]; then
        LD_LIBRARY_PATH="$dir:$LD_LIBRARY_PATH"
        found=1
      elif [ -e "$carried/$lib" ]; then
        ln -sf "$(cd "$carried" && pwd)/$lib" "$links/$lib"
        found=1
      fi
    done
    if [ "$found" = 0 ]; then break; fi
  done
  unresolved_libraries=$(libraries_missing "$@")
}

# libraries_missing PROGRAM...: the sonames the programs' loader does not find, one a line.
libraries_missing() {
  { ldd "$@" 2>/dev/null || true; } | awk '$2 == "=>" && $3 == "not" {print $1}' | sort -u
}

# libraries_loaded PROGRAM...: "soname<TAB>path" of each library the programs load now, one a line.
libraries_loaded() {
  { ldd "$@" 2>/dev/null || true; } | awk '$2 == "=>" {printf "%s\t%s\n", $1, $3}' | sort -u
}
