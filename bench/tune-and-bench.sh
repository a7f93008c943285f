#!/usr/bin/env bash
# On a GPU machine, after .ci/gpu-check built $BUILD_DIR: tune the GEMM
# benchmark shapes (interrupted once and resumed, to show resume), then run
# the GEMM benchmark with the DB (it must compile nothing: every winner is in
# the kernel cache) and the dispatch-overhead benchmark; then the same for
# attention and mLSTM: tune the shapes of bench/attention.py and
# bench/mlstm.py (presets attention-bench, mlstm-bench), run each bench twice
# with the DB, each run printing the kernels it compiled (0 expected: the
# tuner compiled every winner into the cache). Outputs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-gpu}
out=${OUT:-/tmp/kgen-gpu}
mkdir -p "$out"
export KGEN_CACHE_DIR=${KGEN_CACHE_DIR:-$PWD/$build/cache}
export KGEN_TUNING_DB=$out/tuning.json
echo "== kgen tune, interrupted after 25 s"
timeout -s INT 25 "$build/bin/kgen" tune --preset gemm-bench > "$out/tune-1.log" 2>&1
echo "exit $? (130 = interrupted and saved)"; tail -3 "$out/tune-1.log"
echo "== kgen tune, resumed"
"$build/bin/kgen" tune --preset gemm-bench > "$out/tune-2.log" 2> "$out/tune-2.err"
echo "exit $?"; grep -E "problems .*distinct" "$out/tune-2.log"; tail -30 "$out/tune-2.log"
echo "== bench/gemm.py with the DB"
KGEN_LIB="$PWD/$build/lib/libkgen.so" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1 \
  python3 bench/gemm.py --shapes "${BENCH_SHAPES:-8192x8192x8192,4096x4096x4096,2048x2048x2048,1024x1024x1024,532x2048x2048,788x2048x2048,532x2048x16384,4096x14336x4096,4096x4096x14336,1x4096x4096,16x4096x4096,32x4096x4096,64x4096x4096,128x4096x4096,256x4096x4096,1x8192x8192,16x8192x8192,32x8192x8192,64x8192x8192,128x8192x8192,256x8192x8192,127x4099x1023}" --out "$out/bench.md" > "$out/bench.log" 2> "$out/bench.err"
echo "exit $?; compiles during the bench: $(grep -c 'cache: miss' "$out/bench.err")"
tail -12 "$out/bench.log"
echo "== bench/dispatch"
"$build/bin/kgen-bench-dispatch" --out "$out/dispatch.md" 2>&1 | tail -25
echo "== kgen tune, attention and mLSTM bench shapes"
"$build/bin/kgen" tune --preset attention-bench --preset mlstm-bench --csv "$out/tuned.csv" \
  > "$out/tune-families.log" 2> "$out/tune-families.err"
echo "exit $?"; grep -E "problems .*distinct" "$out/tune-families.log"; tail -45 "$out/tune-families.log"
for fam in attention mlstm; do
  echo "== bench/$fam.py with the DB (twice: the second run must compile 0 kernels)"
  for run in 1 2; do
    KGEN_LIB="$PWD/$build/lib/libkgen.so" PYTHONPATH="$PWD/python" PYTHONUNBUFFERED=1 \
      python3 "bench/$fam.py" > "$out/bench-$fam-$run.log" 2> "$out/bench-$fam-$run.err"
    echo "run $run exit $?: $(grep 'kernels compiled in this process' "$out/bench-$fam-$run.log")"
  done
  tail -40 "$out/bench-$fam-2.log"
done
