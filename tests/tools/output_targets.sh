#!/usr/bin/env bash
# Where `fathom` writes what its options name (issue 25): a FIFO, /dev/fd/N and /dev/stdout are
# written in place, never renamed over (as root, `--json /dev/null` replaced the system's
# /dev/null); a folder is refused; an output that is the input is refused and the input left as
# it was; a FIFO given as the input is refused at once, not waited on.
#   output_targets.sh FATHOM REPORT.json TRACE.json.gz
# Everything it makes is under a new temporary folder; /dev itself is never a target.
set -u
fathom="$1" report="$2" trace="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; fi; }

# A FIFO with a reader: the page goes through it, and the FIFO stays a FIFO.
mkfifo "$work/pipe"
cat "$work/pipe" >"$work/through_pipe" &
reader=$!
timeout 20 "$fathom" report "$report" --html "$work/pipe" >/dev/null 2>"$work/err"
status=$?
check "--html FIFO exits 0 (status $status: $(cat "$work/err"))" '[[ $status -eq 0 ]]'
check "--html FIFO leaves a FIFO" '[[ -p "$work/pipe" ]]'
# The reader ends with the writer's close; one that no writer opened (the FIFO renamed over) is
# let go.
[[ -p "$work/pipe" ]] || kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
check "the page went through the FIFO" 'grep -q "<html" "$work/through_pipe"'

# /dev/fd/1: standard output, here a file; written there, in place.
timeout 20 "$fathom" analyze "$trace" --json /dev/fd/1 >"$work/stdout" 2>"$work/err"
status=$?
check "--json /dev/fd/1 exits 0 (status $status: $(cat "$work/err"))" '[[ $status -eq 0 ]]'
check "the JSON went to standard output" 'grep -q "\"schema\"" "$work/stdout"'
# /dev/stdout is a link in /dev that a rename would replace: only where that cannot happen
# (not root) is it tried on the code before the fix; the fix writes descriptor 1.
if [[ $(id -u) -ne 0 ]]; then
  "$fathom" report "$report" --html /dev/stdout >"$work/stdout2" 2>&1
  check "--html /dev/stdout went to standard output" 'grep -q "<html" "$work/stdout2"'
fi

# A folder is not a file to write.
mkdir "$work/folder"
out="$("$fathom" report "$report" --html "$work/folder" 2>&1)"
status=$?
check "--html FOLDER exits 2 (status $status: $out)" '[[ $status -eq 2 ]]'
check "--html FOLDER is named a folder" 'grep -q "is a folder, not a file fathom can write" <<<"$out"'
check "the folder is still a folder" '[[ -d "$work/folder" ]]'

# The input itself as the output: refused, the input as it was.
cp "$report" "$work/run.json"
out="$("$fathom" report "$work/run.json" --html "$work/run.json" 2>&1)"
status=$?
check "--html INPUT exits 2 (status $status: $out)" '[[ $status -eq 2 ]]'
check "--html INPUT says so" 'grep -q "is the input" <<<"$out"'
check "the input is left as it was" 'cmp -s "$report" "$work/run.json"'
cp "$trace" "$work/trace.json.gz"
ln -s "$work/trace.json.gz" "$work/alias.json.gz"
out="$("$fathom" analyze "$work/trace.json.gz" --chrome-trace "$work/alias.json.gz" 2>&1)"
status=$?
check "--chrome-trace INPUT (by another name) exits 2 (status $status)" '[[ $status -eq 2 ]]'
check "the trace is left as it was" 'cmp -s "$trace" "$work/trace.json.gz"'

# A FIFO as the input: refused at once (it waited for a writer forever).
mkfifo "$work/in.json"
out="$(timeout 10 "$fathom" analyze "$work/in.json" 2>&1)"
status=$?
check "analyze FIFO exits 2, not waiting (status $status: $out)" '[[ $status -eq 2 ]]'
check "analyze FIFO says it is not a regular file" 'grep -q "is not a regular file" <<<"$out"'
exit $fail
