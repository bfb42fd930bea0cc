#!/usr/bin/env bash
# Makes a damaged copy of a trace in the build folder (the original stays where it is), then runs
# expect_run.sh on it; a failure when the trace is absent.
#   make_bad_trace.sh KIND TRACE OUT EXPECT_RUN STATUS [REGEX...] -- COMMAND...
# KIND: gz-half (first half of the .gz bytes), json-half (first half of the JSON text) or
# third (the first third of the file's bytes: a truncated SQLite export) or empty (no bytes).
set -u
kind="$1"; trace="$2"; out="$3"; expect="$4"; shift 4
if [[ ! -f "$trace" ]]; then
  echo "FAIL: $trace is absent (tests/data/traces is part of the repository)"
  exit 1
fi
case "$kind" in
  gz-half) size=$(stat -c %s "$trace"); head -c $((size / 2)) "$trace" >"$out" ;;
  json-half) zcat "$trace" >"$out.full"; size=$(stat -c %s "$out.full"); head -c $((size / 2)) "$out.full" >"$out"; rm -f "$out.full" ;;
  third) size=$(stat -c %s "$trace"); head -c $((size / 3)) "$trace" >"$out" ;;
  empty) : >"$out" ;;
  *) echo "unknown kind $kind"; exit 1 ;;
esac
exec "$expect" "$@"
