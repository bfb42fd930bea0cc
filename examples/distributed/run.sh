#!/usr/bin/env bash
# Launches the data-parallel example on this host, like `torchrun --standalone`: N ranks that
# meet at 127.0.0.1 on a port that is free now, each with RANK, LOCAL_RANK, WORLD_SIZE,
# MASTER_ADDR and MASTER_PORT set. Output lines carry their rank; the exit status is the worst
# rank's. Reports land in ./reports (train_ddp.rank<R>.json, and train_ddp.job.json from rank 0).
#
#   examples/distributed/run.sh [-n RANKS] [-b PATH/TO/train_ddp] [-- train_ddp flags]
#   examples/distributed/run.sh -n 4 -- --slow-rank 2 --slow-ms 30
set -euo pipefail

ranks=2
binary=""
while (($#)); do
  case "$1" in
    -n) ranks="$2"; shift 2 ;;
    -b) binary="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1 (try -h)" >&2; exit 2 ;;
  esac
done
if [[ -z "$binary" ]]; then
  here="$(cd "$(dirname "$0")/../.." && pwd)"
  for b in "$here"/build*/examples/distributed/train_ddp; do [[ -x "$b" ]] && binary="$b" && break; done
fi
[[ -x "$binary" ]] || { echo "run.sh: train_ddp not found; build it (target train_ddp) or pass -b PATH" >&2; exit 2; }
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: -n $ranks: give a number of ranks >= 1" >&2; exit 2; }

# A port nobody listens on now (the kernel picks it), on loopback only.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + RANDOM % 20000)))"

pids=()
for ((r = 0; r < ranks; r++)); do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$binary" "$@" > >(sed -u "s/^/[rank $r] /") 2> >(sed -u "s/^/[rank $r] /" >&2) &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || { s=$?; ((s > status)) && status=$s; }
done
exit "$status"
