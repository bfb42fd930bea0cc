#!/usr/bin/env bash
# Instructions one epoch end costs the training thread, at the second epoch and at the last, side
# by side in one run: soak_bench under callgrind, collecting only inside SessionState::end_epoch
# (per thread: the report writer's thread is not in it) and dumping after each call.
#   bench/epoch_end_instructions.sh [SOAK_BENCH=build/bench/soak_bench] [EPOCHS=500] [STEPS=1]
set -euo pipefail
bench="${1:-build/bench/soak_bench}"
epochs="${2:-500}"
steps="${3:-1}"
out="$(mktemp -d /tmp/fathom-epoch-end.XXXXXX)"
fn='fathom::detail::SessionState::end_epoch(bool)'
valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" --collect-atstart=no \
  --toggle-collect="$fn" --dump-after="$fn" "$bench" "$epochs" "$steps" >"$out/bench.txt" 2>"$out/valgrind.txt"
# One dump per epoch end, numbered in order: cg.out.1 is epoch 1's end.
count() { awk '/^(summary|totals):/ {print $2; exit}' "$out/cg.out.$1"; }
first="$(count 2)"
last="$(count "$epochs")"
printf 'instructions per epoch end (%s steps an epoch): epoch 2 %s, epoch %s %s, ratio %s\n' \
  "$steps" "$first" "$epochs" "$last" "$(awk -v a="$first" -v b="$last" 'BEGIN {printf "%.3f", b / a}')"
for e in 1 2 3 $((epochs / 4)) $((epochs / 2)) $((3 * epochs / 4)) "$epochs"; do
  printf '  epoch %4d: %s\n' "$e" "$(count "$e")"
done
rm -rf "$out"
