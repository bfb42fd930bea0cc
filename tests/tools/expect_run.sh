#!/usr/bin/env bash
# Runs a command and checks its exit status and output, for the `fathom` CLI tests.
#   expect_run.sh STATUS [REGEX...] -- COMMAND [ARG...]
# STATUS is the exit status wanted ("any" for either 0 or 1); each REGEX (grep -E) must match a
# line of stdout+stderr; a REGEX starting with '!' must match none.
set -u
want="$1"; shift
patterns=()
while [[ $# -gt 0 && "$1" != "--" ]]; do patterns+=("$1"); shift; done
shift
out="$("$@" 2>&1)"
status=$?
printf '%s\n' "$out"
fail=0
if [[ "$want" == "any" ]]; then
  [[ $status -eq 0 || $status -eq 1 ]] || { echo "FAIL: exit status $status, wanted 0 or 1"; fail=1; }
elif [[ $status -ne $want ]]; then
  echo "FAIL: exit status $status, wanted $want"; fail=1
fi
for p in "${patterns[@]}"; do
  if [[ "$p" == !* ]]; then
    if grep -Eq -- "${p:1}" <<<"$out"; then echo "FAIL: output matches '${p:1}'"; fail=1; fi
  elif ! grep -Eq -- "$p" <<<"$out"; then
    echo "FAIL: no line matches '$p'"; fail=1
  fi
done
exit $fail
