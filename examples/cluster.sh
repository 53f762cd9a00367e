#!/usr/bin/env bash
# A three-peer ubipy cluster on loopback crawling the synthetic web.
#   examples/cluster.sh            (Ctrl-C stops everything)
# Uses the ubipy in .venv (make setup) or on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
UBIPY=${UBIPY:-$( [ -x .venv/bin/ubipy ] && echo .venv/bin/ubipy || echo ubipy )}
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export UBIPY_SECRET=${UBIPY_SECRET:-example-secret}
DATA=$(mktemp -d -t ubipy-cluster-XXXX)
PIDS=()
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; echo "shards in $DATA"; }
trap cleanup EXIT INT TERM

"$PY" -m ubipy.synthweb --hosts 60 --pages 20 --port 18700 >"$DATA/synthweb.log" 2>&1 &
PIDS+=($!)
COMMON=(--proxy http://127.0.0.1:18700 --delay 0.1)
"$UBIPY" peer --data "$DATA/a" --listen 127.0.0.1:7101 "${COMMON[@]}" 2>"$DATA/a.log" &
PIDS+=($!)
sleep 1
for p in b:7102 c:7103; do
  "$UBIPY" peer --data "$DATA/${p%%:*}" --listen "127.0.0.1:${p##*:}" --join 127.0.0.1:7101 \
    "${COMMON[@]}" 2>"$DATA/${p%%:*}.log" &
  PIDS+=($!)
done
sleep 3
"$UBIPY" seed examples/seeds.txt --peer 127.0.0.1:7102
for _ in 1 2 3 4 5 6; do
  sleep 5
  "$UBIPY" status --peer 127.0.0.1:7101
done
