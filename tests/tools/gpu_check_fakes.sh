# shellcheck shell=bash
# A GPU machine made of stand-ins, for tools/gpu-check's tests (sourced by
# gpu_check_test.sh): fake_gpu_machine DIR writes
#   DIR/bin/nvidia-smi         one H100 (FAKE_GPUS of them);
#   DIR/bin/mpirun             runs the program once, whatever -np says;
#   DIR/bin/compute-sanitizer  runs the program under it;
#   DIR/build/programs.tar.gz  the prepared programs, packed as --prepare packs
#                              them: the device query (a C program that loads
#                              a library carried in lib/, found only by
#                              tools/gpu_check/libraries.sh), the kernel tests
#                              (gtest's JSON report for the filter they are
#                              given), tessera (train, plan, compare: each
#                              call's arguments and TESSERA_DATA_DIR appended
#                              to DIR/tessera-calls), the ranks tests; beside
#                              it prepared.json, of commit 0123abc.
# FAKE_HANG=training makes the kernel tests write their process id to
# DIR/hanging and sleep when asked for the GPU step's tests, as a hung step would.

fake_gpu_machine() {
  local dir=$1
  mkdir -p "$dir/bin" "$dir/build/tools" "$dir/build/tests" "$dir/build/cli"
  cat >"$dir/bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
for ((i = 0; i < ${FAKE_GPUS:-1}; i++)); do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-fake-$i)"; done
EOF
  cat >"$dir/bin/mpirun" <<'EOF'
#!/usr/bin/env bash
while [ $# -gt 0 ] && [[ $1 == -* ]]; do
  [ "$1" = -np ] && shift
  shift
done
exec "$@"
EOF
  cat >"$dir/bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
while [ $# -gt 0 ] && [[ $1 == --* ]]; do shift 2; done
exec "$@"
EOF
  mkdir -p "$dir/build/lib" "$dir/src"
  echo 'int fake_carried(void) { return 42; }' >"$dir/src/carried.c"
  cat >"$dir/src/device.c" <<'EOF'
#include <stdio.h>
int fake_carried(void);
int main(void) {
  if (fake_carried() != 42) return 1;
  printf("NVIDIA H100 80GB HBM3\t9.0\t85017493504\t13000\n");
  return 0;
}
EOF
  cc -shared -fPIC -Wl,-soname,libgpucheckcarried.so.1 -o "$dir/build/lib/libgpucheckcarried.so.1" "$dir/src/carried.c"
  cc -o "$dir/build/tools/tessera-cuda-device" "$dir/src/device.c" "$dir/build/lib/libgpucheckcarried.so.1"
  cat >"$dir/build/tests/tessera_cuda_kernel_tests" <<EOF
#!/usr/bin/env bash
marker=$dir/hanging
EOF
  cat >>"$dir/build/tests/tessera_cuda_kernel_tests" <<'EOF'
filter="" report=""
for argument in "$@"; do
  case $argument in
    --gtest_filter=*) filter=${argument#--gtest_filter=} ;;
    --gtest_output=json:*) report=${argument#--gtest_output=json:} ;;
  esac
done
kernels='{"name": "ElementwiseOnGpu", "testsuite": [{"name": "AdamWMatchesCpuOptimizer", "result": "COMPLETED", "status": "RUN", "max_error gpu adamw fp32": "0.000000"}]}'
step='{"name": "GptTrainingOnGpu", "testsuite": [{"name": "TwoAccumulatedMicroBatchesMatchTheCpuEngine", "result": "COMPLETED", "status": "RUN", "max_error loss": "0.000001"}]},
      {"name": "RecomputeOnGpu", "testsuite": [{"name": "SameLossAndGradientsWithALowerActivationPeak", "result": "COMPLETED", "status": "RUN", "activation_peak full": "1024"}]}'
case $filter in
  -*) suites=$kernels; tests=1 ;;
  "") suites="$kernels, $step"; tests=3 ;;
  *) [ "${FAKE_HANG:-}" = training ] && { echo $$ >"$marker"; exec sleep 60; }
     suites=$step; tests=2 ;;
esac
[ -n "$report" ] && echo "{\"tests\": $tests, \"failures\": 0, \"testsuites\": [$suites]}" >"$report"
echo "[  PASSED  ] $tests tests."
EOF
  cat >"$dir/build/cli/tessera" <<EOF
#!/usr/bin/env bash
echo "\$* TESSERA_DATA_DIR=\${TESSERA_DATA_DIR:-}" >>"$dir/tessera-calls"
EOF
  cat >>"$dir/build/cli/tessera" <<'EOF'
command=$1 out="" resume=0
shift
while [ $# -gt 0 ]; do
  case $1 in
    --out | --output) out=$2; shift ;;
    --resume) resume=1 ;;
  esac
  shift
done
case $command in
  train) mkdir -p "$out/checkpoint"
         touch "$out/checkpoint/optimizer.safetensors"
         echo '{"loss": [10.9]}' >"$out/metrics.json"
         echo '{"schema": 1}' >"$out/plan.json"
         if [ "$resume" = 1 ]; then echo "trained steps 3-4"; else echo "trained steps 1-2"; fi ;;
  plan) echo '{"plans": []}' >"$out" ;;
  compare) echo '{"categories": []}' ;;
esac
EOF
  local test
  for test in nccl_ranks ddp zero gemini fsdp tensor_parallel hybrid_zero pipeline context_tensor_parallel; do
    printf '#!/usr/bin/env bash\necho "rank 0: gradients relative error 1e-07"\n' >"$dir/build/tests/tessera_${test}_gpu_test"
  done
  chmod +x "$dir"/bin/* "$dir"/build/{tools,tests,cli}/*
  tar -C "$dir/build" -czf "$dir/build/programs.tar.gz" tools tests cli lib
  rm -r "$dir/build/tools" "$dir/build/tests" "$dir/build/cli" "$dir/build/lib"
  echo '{"commit": "0123abc", "programs": ["tools/tessera-cuda-device"]}' >"$dir/build/prepared.json"
}
