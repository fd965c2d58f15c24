#!/usr/bin/env python3
"""Prints a markdown table row per gate under examples/clients/results/ (written by
matrix.sh): library, workload and store, TTL, seeds run, verdicts, classes, warnings, the first
failing seed and its replay command."""

import glob
import json
import os

VERSIONS = {
    "python-redis_py_lock": "redis-py 8.2.0 `Lock`",
    "python-python_redis_lock": "python-redis-lock 4.0.1",
    "python-pottery_redlock": "pottery 3.0.1 `Redlock`",
    "node-redlock": "redlock 5.0.0-beta.2",
    "node-sesamecare_redlock": "@sesamecare-oss/redlock 1.4.0",
    "node-redis_semaphore": "redis-semaphore 5.8.0 `Mutex`",
    "python-kazoo_lock": "kazoo 2.11.0 `Lock`",
    "node-etcd3_lock": "etcd3 1.1.2 `Lock`",
}

here = os.path.dirname(os.path.abspath(__file__))
print("| library | workload / store | ttl | seeds run | verdicts | classes | warnings | first failing seed | replay |")
print("|---|---|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(here, "results", "*", "gate.json"))):
    gate = json.load(open(path))
    name = os.path.basename(os.path.dirname(path))
    key = next((k for k in VERSIONS if name.startswith(k + "-")), name)
    s = gate["settings"]
    verdicts = ", ".join(f"{n} {v}" for v, n in sorted(gate["validity"].items()))
    classes = ", ".join(f"`{c}` {n}" for c, n in sorted(gate["anomalies"].items())) or "none"
    warnings = ", ".join(f"`{c}` {n}" for c, n in sorted(gate.get("warnings", {}).items())) or "none"
    failures = sorted(gate.get("failures", []), key=lambda f: f.get("seed", 1 << 62))
    first = str(failures[0]["seed"]) if failures else "none"
    replay = f"`{failures[0]['replay'][-1]}`" if failures else ""
    seeds = f"{gate['seeds_run']} of {gate['seeds']['start']}..{gate['seeds']['end']}"
    print(
        f"| {VERSIONS.get(key, key)} | {s['workload']} / {s['store']} | {s['ttl_ns'] // 1_000_000} ms "
        f"| {seeds} | {verdicts} | {classes} | {warnings} | {first} | {replay} |"
    )
