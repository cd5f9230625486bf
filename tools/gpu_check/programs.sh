# shellcheck shell=bash
# The programs tools/gpu-check runs, by their paths in a build directory, and
# how to build them (sourced by tools/gpu-check, which builds them on the GPU
# machine, and by tools/gpu_check/prepare.sh, which builds them elsewhere).
# Without the optional ones the stages that run them say "not run": the ranks
# tests exist where CMake found MPI and NCCL (and cuDNN), cli/tessera may be
# missing from programs built and copied by hand.
gpu_check_required_programs=(tools/tessera-cuda-device tests/tessera_cuda_kernel_tests)
gpu_check_optional_programs=(cli/tessera tests/tessera_nccl_ranks_gpu_test tests/tessera_ddp_gpu_test tests/tessera_zero_gpu_test
                             tests/tessera_gemini_gpu_test tests/tessera_fsdp_gpu_test tests/tessera_tensor_parallel_gpu_test
                             tests/tessera_hybrid_zero_gpu_test tests/tessera_pipeline_gpu_test
                             tests/tessera_ring_attention_gpu_test tests/tessera_context_parallel_gpu_test
                             tests/tessera_context_tensor_parallel_gpu_test bench/gpu_gemm_roof)

# build_programs BUILD_DIR: configures BUILD_DIR (Release, CUDA, where it has
# no cache yet) and builds every required program and every optional one its
# build defines; the build's output goes to stderr only when it fails.
build_programs() {
  local build_dir=$1 log targets=() program defined
  log=$(mktemp)
  if [ ! -f "$build_dir/CMakeCache.txt" ] &&
     ! cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DTESSERA_CUDA=ON >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    return 1
  fi
  # The targets, one a line: Makefiles list "... NAME", Ninja "NAME: phony".
  defined=$(cmake --build "$build_dir" --target help 2>/dev/null | sed -E 's/^\.\.\. //; s/[: ].*//')
  for program in "${gpu_check_required_programs[@]}" "${gpu_check_optional_programs[@]}"; do
    if grep -Fxq -- "$(basename "$program")" <<<"$defined"; then targets+=("$(basename "$program")"); fi
  done
  if ! cmake --build "$build_dir" -j"${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" --target "${targets[@]}" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    return 1
  fi
  rm -f "$log"
}
