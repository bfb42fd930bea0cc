#!/usr/bin/env bash
# `fathom analyze` on a real trace from tests/data/traces (in the repository: absent is a failure).
#   analyze_check.sh FATHOM TRACE JSON_OUT [REGEX...] [json:REGEX...] [-- ANALYZE_ARG...]
# Exit status must be 0; each REGEX must match the printed analysis, each json:REGEX the JSON
# written to JSON_OUT; a REGEX starting with '!' must match nothing.
set -u
fathom="$1"; trace="$2"; json_out="$3"; shift 3
patterns=()
while [[ $# -gt 0 && "$1" != "--" ]]; do patterns+=("$1"); shift; done
[[ $# -gt 0 ]] && shift
if [[ ! -f "$trace" ]]; then
  echo "FAIL: $trace is absent (tests/data/traces is part of the repository)"
  exit 1
fi
rm -f "$json_out"
out="$("$fathom" analyze "$trace" --json "$json_out" "$@" 2>&1)"
status=$?
printf '%s\n' "$out"
fail=0
[[ $status -eq 0 ]] || { echo "FAIL: exit status $status, wanted 0"; fail=1; }
[[ -s "$json_out" ]] || { echo "FAIL: no JSON written to $json_out"; fail=1; }
for p in "${patterns[@]}"; do
  where="$out"
  if [[ "$p" == json:* ]]; then p="${p#json:}"; where="$(cat "$json_out" 2>/dev/null)"; fi
  if [[ "$p" == !* ]]; then
    if grep -Eq -- "${p:1}" <<<"$where"; then echo "FAIL: output matches '${p:1}'"; fail=1; fi
  elif ! grep -Eq -- "$p" <<<"$where"; then
    echo "FAIL: no line matches '$p'"; fail=1
  fi
done
exit $fail
