#!/usr/bin/env bash
# Instructions per simulated client call, under callgrind, for two configurations:
#
#   default  the fenced register, 5 workers, every default fault, the SQLite store;
#   mutex    the mutex workload, 3 workers, no faults: the bare call path.
#
# Each configuration runs at two sizes (`--ops`); the difference of the two runs cancels
# start-up and saving, and is divided by the difference in client calls (the invokes of the
# saved histories). Two figures per configuration: the whole program, and the simulation alone
# (`Launch::run`, inclusive: the runtime, its workers and backends, none of the saving; it
# stays a function of its own under link-time optimisation, where `Runtime::block_on` is
# inlined into it). Instruction counts do not depend on the machine's load, so they compare
# across days and machines.
#
# Usage: benches/callgrind-per-call.sh [FENCER] (default target/release/fencer; build it with
# `cargo build --release` first). SMALL, LARGE (ops per worker) and SEED may be set in the
# environment; OUT keeps the callgrind files and runs (default: a temporary directory). CLIENT
# names the lock client the workers use (`--client`; default fencer's reference): with
# FENCER=target/release/examples/client_cli and CLIENT=watchdog-lock it measures a user's own
# library (`cargo build --release --example client_cli`).
set -euo pipefail

fencer=${1:-target/release/fencer}
small=${SMALL:-50}
large=${LARGE:-100}
seed=${SEED:-1}
client=${CLIENT:-reference}
out=${OUT:-$(mktemp -d)}

[[ -x $fencer ]] || { echo "no fencer binary at $fencer: cargo build --release" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }

declare -A config_args=(
    [default]=""
    [mutex]="--workload mutex --workers 3 --nemesis none"
)

# Total instructions of a callgrind file, and those spent inside the simulation runtime.
total_ir() { sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$1"; }
simulate_ir() {
    callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
        awk '/launch.rs:fencer_run::launch::Launch::run / && !found { gsub(",", "", $1); print $1; found = 1 }'
}
invokes() { grep -c '"type":"invoke"' "$1/history.jsonl"; }

echo "fencer: $fencer, client $client, seed $seed, --ops $small and $large, files in $out"
for name in mutex default; do
    for ops in "$small" "$large"; do
        rm -rf "$out/run.$name.$ops"
        # shellcheck disable=SC2086 # the arguments are words on purpose
        valgrind --tool=callgrind --callgrind-out-file="$out/cg.$name.$ops" \
            "$fencer" run --seed "$seed" --ops "$ops" --client "$client" ${config_args[$name]} \
            --out "$out/run.$name.$ops" >/dev/null 2>"$out/valgrind.$name.$ops.log"
    done
    calls_small=$(invokes "$out/run.$name.$small")
    calls_large=$(invokes "$out/run.$name.$large")
    calls=$((calls_large - calls_small))
    total=$(($(total_ir "$out/cg.$name.$large") - $(total_ir "$out/cg.$name.$small")))
    sim_large=$(simulate_ir "$out/cg.$name.$large")
    [[ -n $sim_large ]] || { echo "no Launch::run in the profile" >&2; exit 1; }
    sim=$((sim_large - $(simulate_ir "$out/cg.$name.$small")))
    printf '%-8s calls %d -> %d: %d instructions per call in the simulation, %d in all\n' \
        "$name" "$calls_small" "$calls_large" $((sim / calls)) $((total / calls))
done
