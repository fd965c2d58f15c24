#!/usr/bin/env bash
# Runs every adapter under examples/clients/ through `fencer gate` against its lock server
# (Redis; ZooKeeper for kazoo; etcd for etcd3) with client faults, for the mutex workload and
# for lock-counter with an unfenced store, and keeps each gate's gate.json (and the failing run,
# if any) under examples/clients/results/.
# Usage (from the repository root): examples/clients/matrix.sh [SEEDS] [LIBRARY...]
#   FENCER=path/to/fencer (default: fencer on PATH), LOCK=redis://127.0.0.1:6379, JOBS=4
#   ZK_LOCK=private:zookeeper (kazoo's lock: a ZooKeeper fencer starts for each run, tick 50 ms)
#   ETCD_LOCK=private:etcd (etcd3's lock: an etcd fencer starts for each run)
#   FAULTS=pause,skew,partition,delay-replies,drop-replies,cut (the nemesis; add server faults
#   such as server-pause,restart when the lock is a server or cluster fencer starts)
#   SUFFIX=NAME (results go to results/<language>-<library>-<workload>-NAME, beside the
#   default configuration's)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fencer="${FENCER:-fencer}"
redis_lock="${LOCK:-redis://127.0.0.1:6379}"
zk_lock="${ZK_LOCK:-private:zookeeper}"
etcd_lock="${ETCD_LOCK:-private:etcd}"
jobs="${JOBS:-4}"
seeds="${1:-0..20}"
shift || true
libraries=("$@")
[ ${#libraries[@]} -eq 0 ] && libraries=(
  python/redis_py_lock python/python_redis_lock python/pottery_redlock
  node/redlock node/sesamecare_redlock node/redis_semaphore python/kazoo_lock node/etcd3_lock
)
faults="${FAULTS:-pause,skew,partition,delay-replies,drop-replies,cut}"
suffix="${SUFFIX:+-$SUFFIX}"
# Python adapters import their library before answering hello; on a loaded machine that can
# take longer than fencer's default 10 s.
export FENCER_EXEC_HELLO_TIMEOUT_MS="${FENCER_EXEC_HELLO_TIMEOUT_MS:-60000}"

for library in "${libraries[@]}"; do
  case "$library" in
    python/*) command="exec:python3 examples/clients/$library/client.py" ;;
    node/*) command="exec:node examples/clients/$library/client.js" ;;
  esac
  lock="$redis_lock"; ttl=300ms; renew=100ms; call_timeout=200ms; gap=50ms
  # python-redis-lock takes its expire in whole seconds.
  [ "$library" = python/python_redis_lock ] && { ttl=1s; renew=300ms; }
  # kazoo: the lease is the ZooKeeper session. Its pings come every 10 to 400 ms whatever the
  # timeout, so a 300 ms session expires with no fault at all; 1 s is the longest session
  # fencer's private ZooKeeper grants (20 ticks of 50 ms). kazoo's calls block while it
  # reconnects (far past acquire's timeout), and a lock fencer gave up on stays held by the
  # live session for the rest of the run: the call timeout lets fencer wait for kazoo. With a
  # fault every 50 ms (of 0.3 to 2 s at this TTL) kazoo cannot hold a session until the
  # schedule is over, and the work runs after the faults: one every 500 ms overlaps them.
  [ "$library" = python/kazoo_lock ] &&
    { lock="$zk_lock"; ttl=1s; renew=300ms; call_timeout=10s; gap=500ms; }
  # etcd3: etcd takes lease TTLs in whole seconds, at least 1 s on fencer's private etcd; the
  # call timeout and the fault gap keep the Redis rows' proportions to the TTL (2/3 and 1/6,
  # rounded to 500 ms and 200 ms).
  [ "$library" = node/etcd3_lock ] &&
    { lock="$etcd_lock"; ttl=1s; renew=300ms; call_timeout=500ms; gap=200ms; }
  for workload in mutex lock-counter; do
    store=sqlite
    [ "$workload" = lock-counter ] && store=sqlite-unfenced
    out="$here/results/${library//\//-}-$workload$suffix"
    rm -rf "$out"
    echo "== $library $workload ($seeds)"
    start=$(date +%s)
    "$fencer" gate --client "$command" --lock "$lock" --workload "$workload" --store "$store" \
      --workers 3 --ops 8 --ttl "$ttl" --renew-every "$renew" --call-timeout "$call_timeout" \
      --nemesis "$faults" --fault-gap "$gap" --seeds "$seeds" --jobs "$jobs" \
      --no-regressions --no-shrink --out "$out" > "$out.log" 2>&1
    rc=$?
    echo "exit $rc in $(( $(date +%s) - start )) s"
    grep -v '^exec\[' "$out.log" | grep -A12 'gate summary'
  done
done
