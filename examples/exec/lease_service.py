#!/usr/bin/env python3
"""A lease service and the fenced store it protects, in one process, for fencer's exec: adapter.

It speaks fencer's exec protocol (docs/exec-protocol.md): one JSON request per line on stdin,
one JSON reply per line on stdout, logs on stderr. Standard library only.

    fencer run --lock 'exec:python3 examples/exec/lease_service.py' \\
               --store 'exec:python3 examples/exec/lease_service.py' \\
               --ttl 300ms --renew-every 100ms --call-timeout 100ms --ops 5

- Leases expire on the monotonic clock (time.monotonic_ns), never the wall clock, so a step
  of the machine's clock cannot end or extend one.
- Renew and release check the caller's owner token against the live lease.
- Fencing tokens count up per lock; a write applies only if its token is >= the newest the
  store accepted for the key.
- Requests are served one at a time, so each check and the change it guards are one atomic
  step, and every change is entered in the lock log or the applied log in that same step.

--journal FILE appends every change to FILE before the reply goes out and replays FILE at
start, so tokens, fences and both logs survive fencer's `restart` fault (SIGKILL, then the
same command again). CLOCK_MONOTONIC is the machine's, so lease expiries survive too. Without
a journal, a restart forgets every token: fencer then reports the regression.
"""

import argparse
import json
import os
import sys
import time

PROTOCOL = 1
MS_NS = 1_000_000


class Service:
    """The lock service's leases and the store's registers, with both logs."""

    def __init__(self, journal_path):
        self.leases = {}  # lock -> {"owner", "fencing_token", "expires_ns"}
        self.last_token = {}  # lock -> newest fencing token granted on it
        self.registers = {}  # key -> {"fencing_token", "write_id", "value"}
        self.applied = []  # applied log: every applied write, in store order
        self.lock_log = []  # grants, renewals, releases, expiries, in service order
        self.journal = None
        if journal_path:
            self.replay(journal_path)
            self.journal = open(journal_path, "a", encoding="utf-8")

    # Every change is one record: journaled first, then applied. Replaying the journal
    # applies the same records again, so the state after a restart is the state before it.

    def record(self, log, entry):
        if self.journal is not None:
            self.journal.write(json.dumps({log: entry}) + "\n")
            self.journal.flush()
        self.apply(log, entry)

    def apply(self, log, entry):
        if log == "store":
            self.registers[entry["key"]] = {
                "fencing_token": entry["fencing_token"],
                "write_id": entry["write_id"],
                "value": entry["value"],
            }
            self.applied.append(
                {name: entry[name] for name in ("seq", "key", "fencing_token", "write_id")}
            )
            return
        self.lock_log.append(entry)
        lock = entry["lock"]
        if entry["op"] == "grant":
            self.last_token[lock] = entry["fencing_token"]
            self.leases[lock] = {
                "owner": entry["owner"],
                "fencing_token": entry["fencing_token"],
                "expires_ns": entry["expires_ns"],
            }
        elif entry["op"] == "renew":
            self.leases[lock]["expires_ns"] = entry["expires_ns"]
        else:  # release, expire
            del self.leases[lock]

    def replay(self, path):
        try:
            with open(path, "rb") as journal:
                lines = journal.readlines()
        except FileNotFoundError:
            return
        kept = 0
        for line in lines:
            if not line.endswith(b"\n"):
                break  # torn by a kill mid-write: never answered, so never promised
            ((log, entry),) = json.loads(line).items()
            self.apply(log, entry)
            kept += len(line)
        if kept < sum(len(line) for line in lines):
            os.truncate(path, kept)
        print(
            f"replayed {len(self.lock_log)} lock and {len(self.applied)} store changes",
            file=sys.stderr,
        )

    # The lock service.

    def lock_entry(self, op, lock, now_ns, **fields):
        return {"seq": len(self.lock_log) + 1, "op": op, "lock": lock, "at_ns": now_ns, **fields}

    def live_lease(self, lock, now_ns):
        """The unexpired lease on `lock`, or None; an expiry noticed now is logged now."""
        lease = self.leases.get(lock)
        if lease is not None and lease["expires_ns"] <= now_ns:
            self.record(
                "lock",
                self.lock_entry(
                    "expire",
                    lock,
                    now_ns,
                    holder=lease["owner"],
                    holder_token=lease["fencing_token"],
                ),
            )
            return None
        return lease

    def held(self, lock, owner, now_ns):
        """The live lease on `lock` if `owner` holds it, else None."""
        lease = self.live_lease(lock, now_ns)
        if lease is None or lease["owner"] != owner:
            return None
        return lease

    def acquire(self, request):
        lock, owner, ttl_ms = request["lock"], request["owner"], request["ttl_ms"]
        now_ns = time.monotonic_ns()
        if self.live_lease(lock, now_ns) is not None:
            return {"result": "busy"}
        token = self.last_token.get(lock, 0) + 1
        self.record(
            "lock",
            self.lock_entry(
                "grant",
                lock,
                now_ns,
                owner=owner,
                fencing_token=token,
                ttl_ms=ttl_ms,
                expires_ns=now_ns + ttl_ms * MS_NS,
            ),
        )
        return {"result": "granted", "fencing_token": token}

    def renew(self, request):
        lock, owner, ttl_ms = request["lock"], request["owner"], request["ttl_ms"]
        now_ns = time.monotonic_ns()
        lease = self.held(lock, owner, now_ns)
        if lease is None:
            return {"result": "not-owner"}
        self.record(
            "lock",
            self.lock_entry(
                "renew",
                lock,
                now_ns,
                owner=owner,
                holder=lease["owner"],
                holder_token=lease["fencing_token"],
                ttl_ms=ttl_ms,
                expires_ns=now_ns + ttl_ms * MS_NS,
            ),
        )
        return {"result": "done"}

    def release(self, request):
        lock, owner, now_ns = request["lock"], request["owner"], time.monotonic_ns()
        lease = self.held(lock, owner, now_ns)
        if lease is None:
            return {"result": "not-owner"}
        self.record(
            "lock",
            self.lock_entry(
                "release",
                lock,
                now_ns,
                owner=owner,
                holder=lease["owner"],
                holder_token=lease["fencing_token"],
            ),
        )
        return {"result": "done"}

    # The fenced store.

    def write(self, request):
        key, token = request["key"], request["fencing_token"]
        write_id, value = request["write_id"], request["value"]
        newest = self.registers.get(key, {"fencing_token": 0})["fencing_token"]
        if token < newest:
            return {"result": "rejected", "current_token": newest}
        self.record(
            "store",
            {
                "seq": len(self.applied) + 1,
                "key": key,
                "fencing_token": token,
                "write_id": write_id,
                "value": value,
            },
        )
        return {"result": "applied"}

    def read(self, request):
        register = self.registers.get(request["key"])
        if register is None:
            return {"result": "value", "fencing_token": 0, "write_id": None, "value": None}
        return {"result": "value", **register}

    # The optional logs and the handshake.

    def applied_log(self, _request):
        return {"result": "applied-log", "writes": self.applied}

    def lock_log_reply(self, _request):
        return {"result": "lock-log", "entries": self.lock_log}

    def hello(self, request):
        if request.get("protocol") != PROTOCOL:
            print(f"fencer speaks protocol {request.get('protocol')}", file=sys.stderr)
        return {
            "result": "hello",
            "protocol": PROTOCOL,
            "roles": ["lock", "store"],
            "offers": ["applied-log", "lock-log"],
        }

    def handle(self, request):
        calls = {
            "hello": self.hello,
            "acquire": self.acquire,
            "renew": self.renew,
            "release": self.release,
            "write": self.write,
            "read": self.read,
            "applied-log": self.applied_log,
            "lock-log": self.lock_log_reply,
        }
        call = calls.get(request.get("op"))
        if call is None:
            return {"error": "not-applied", "message": f"unknown op {request.get('op')!r}"}
        try:
            return call(request)
        except (KeyError, TypeError) as missing:
            # Every check comes before the change it guards: nothing changed.
            return {"error": "not-applied", "message": f"bad {request['op']} request: {missing!r}"}
        except OSError as error:
            # The journal may or may not hold the change.
            return {"error": "unknown", "message": f"journal: {error}"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journal", help="keep every change in this file across restarts")
    service = Service(parser.parse_args().journal)
    while True:
        line = sys.stdin.readline()
        if not line:
            return  # fencer closed our stdin: the run is over
        try:
            request = json.loads(line)
        except ValueError as error:
            print(f"not a request ({error}): {line!r}", file=sys.stderr)
            continue
        reply = {"id": request.get("id"), **service.handle(request)}
        try:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            return


if __name__ == "__main__":
    main()
