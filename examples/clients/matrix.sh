#!/usr/bin/env bash
# Runs every adapter under examples/clients/ through `fencer gate` against Redis with client
# faults, for the mutex workload and for lock-counter with an unfenced store, and keeps each
# gate's gate.json (and the failing run, if any) under examples/clients/results/.
# Usage (from the repository root): examples/clients/matrix.sh [SEEDS] [LIBRARY...]
#   FENCER=path/to/fencer (default: fencer on PATH), LOCK=redis://127.0.0.1:6379, JOBS=4
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fencer="${FENCER:-fencer}"
lock="${LOCK:-redis://127.0.0.1:6379}"
jobs="${JOBS:-4}"
seeds="${1:-0..20}"
shift || true
libraries=("$@")
[ ${#libraries[@]} -eq 0 ] && libraries=(
  python/redis_py_lock python/python_redis_lock python/pottery_redlock
  node/redlock node/sesamecare_redlock node/redis_semaphore
)
faults="pause,skew,partition,delay-replies,drop-replies,cut"
# Python adapters import their library before answering hello; on a loaded machine that can
# take longer than fencer's default 10 s.
export FENCER_EXEC_HELLO_TIMEOUT_MS="${FENCER_EXEC_HELLO_TIMEOUT_MS:-60000}"

for library in "${libraries[@]}"; do
  case "$library" in
    python/*) command="exec:python3 examples/clients/$library/client.py" ;;
    node/*) command="exec:node examples/clients/$library/client.js" ;;
  esac
  # python-redis-lock takes its expire in whole seconds.
  ttl=300ms; renew=100ms
  [ "$library" = python/python_redis_lock ] && { ttl=1s; renew=300ms; }
  for workload in mutex lock-counter; do
    store=sqlite
    [ "$workload" = lock-counter ] && store=sqlite-unfenced
    out="$here/results/${library//\//-}-$workload"
    rm -rf "$out"
    echo "== $library $workload ($seeds)"
    start=$(date +%s)
    "$fencer" gate --client "$command" --lock "$lock" --workload "$workload" --store "$store" \
      --workers 3 --ops 8 --ttl "$ttl" --renew-every "$renew" --call-timeout 200ms \
      --nemesis "$faults" --fault-gap 50ms --seeds "$seeds" --jobs "$jobs" \
      --no-regressions --no-shrink --out "$out" > "$out.log" 2>&1
    rc=$?
    echo "exit $rc in $(( $(date +%s) - start )) s"
    grep -v '^exec\[' "$out.log" | grep -A12 'gate summary'
  done
done
