#!/usr/bin/env bash
# overhead_bench's costs in instructions: the op callback against Kineto's collection per op, a
# phase scope, the training step, under callgrind (perf counters are not available on these VMs,
# and instruction counts do not move with the neighbours' load). With the null NVTX tool attached,
# so fathom's op callback is registered and its ranges are delivered.
#   bench/instruction_counts.sh [build dir] [overhead_bench options: --calls N --steps N --reps N]
set -euo pipefail
BUILD=build
if [[ -n "${1:-}" && "$1" != --* ]]; then BUILD="$1"; shift; fi
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
# CALLGRIND_DUMPS_DIR=DIR keeps the per-section dumps there (callgrind_annotate reads them).
if [[ -n "${CALLGRIND_DUMPS_DIR:-}" ]]; then
  mkdir -p "$CALLGRIND_DUMPS_DIR"
  out="$CALLGRIND_DUMPS_DIR/callgrind.out"
else
  out="$(mktemp -d)/callgrind.out"
  trap 'rm -rf "$(dirname "$out")"' EXIT
fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
NVTX_INJECTION64_PATH="$BUILD/bench/libfathom_nvtx_null_tool.so" \
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" -q \
  "$BUILD/bench/overhead_bench" --instructions "$out" --steps 2 --reps 3 "$@"
