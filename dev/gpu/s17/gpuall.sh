#!/usr/bin/env bash
# Session 17: every GPU test of main (what `make test-gpu` runs, FP4_GPU_REQUIRE=1: a skip fails), each under
# timeout, then test_gpu_native and test_gpu_runtime with FP4LANE_CUDA_GEMM=0; SKIP="a b" leaves tests out
# (the ones another part of the call runs). After prep.sh. Logs under $OUT/gpuall/, a line per test.
set -u
U=/tmp/s17; T=$U/build-dev/tests/gpu; O=$OUT/gpuall; mkdir -p $O
export FP4_BUILD=$U/build-dev LD_LIBRARY_PATH=$U/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FP4_GPU_REQUIRE=1
# test_nccl_comm links libnccl.so.2: torch's wheel has one (not carried: 218 MB)
NL=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
[ -n "$NL" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$NL
one() { # label, env words..., binary
  local lab=$1 t0=$SECONDS; shift
  env "$@" > $O/$lab.txt 2>&1; local rc=$?
  echo "$lab rc=$rc $((SECONDS - t0)) s $(grep -E '^[0-9]+ passed, [0-9]+ failed' $O/$lab.txt | tail -1)"
  [ $rc = 0 ] || grep -m 6 -E "CHECK|FAIL|differ|rror" $O/$lab.txt | cut -c1-240; }
for t in $T/test_*; do
  n=$(basename $t); case " ${SKIP:-} " in *" ${n#test_gpu_} "*|*" $n "*) continue;; esac
  one $n timeout ${TMO:-150} $t
done
one native_gemm0 FP4LANE_CUDA_GEMM=0 timeout 100 $T/test_gpu_native
one runtime_gemm0 FP4LANE_CUDA_GEMM=0 timeout 150 $T/test_gpu_runtime
(cd $OUT && tar czf gpuall.tgz gpuall && rm -rf gpuall)
