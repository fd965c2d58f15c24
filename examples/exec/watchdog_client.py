#!/usr/bin/env python3
"""A Redis lock client with a watchdog, as fencer's exec client (protocol 2, client role).

fencer starts one of these per worker (fencer run --client 'exec:python3 watchdog_client.py'
--lock redis://127.0.0.1:6379 or --lock private:redis) and tells it in its hello which server
to talk to: fencer's proxy for that worker. It speaks RESP to Redis itself, standard library
only:

- acquire: SET lock owner NX PX ttl, with fencer's owner token as the value; then a watchdog
  thread renews every ttl/3 with a Lua compare-and-PEXPIRE and says `renewed`, or `lost` when
  a renewal is refused or none succeeded for a whole TTL;
- check: GET lock == owner, asked of Redis;
- release: stops the watchdog, then a Lua compare-and-DEL;
- cancel: stops the watchdog without releasing.

Redis locks hand out no fencing token: fencer's worker writes with token 0, so judge it with an
unfenced store or the lock-counter workload.

--bug switches on a typical watchdog bug: the check is answered from a flag set at acquire,
never asking Redis, and the watchdog swallows refused renewals (no `lost`).

Logs go to stderr; stdout carries protocol lines only (docs/exec-protocol.md).
"""

import json
import socket
import sys
import threading
import time
from urllib.parse import urlparse

BUG = "--bug" in sys.argv[1:]

RENEW = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"
)
RELEASE = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end"
)

out_lock = threading.Lock()


def send(message):
    """Writes one protocol line; the watchdog threads write notices too."""
    with out_lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def log(text):
    print(f"watchdog_client: {text}", file=sys.stderr, flush=True)


class RedisError(Exception):
    """Redis answered with an error, or the connection failed."""


class Redis:
    """One RESP connection, opened on first use and again after any failure."""

    def __init__(self, host, port, timeout):
        self.address = (host, port)
        self.timeout = timeout
        self.sock = None
        self.reader = None

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None
        self.reader = None

    def command(self, *words):
        try:
            if self.sock is None:
                self.sock = socket.create_connection(self.address, timeout=self.timeout)
                self.sock.settimeout(self.timeout)
                self.reader = self.sock.makefile("rb")
            parts = [f"*{len(words)}\r\n".encode()]
            for word in words:
                data = str(word).encode()
                parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
            self.sock.sendall(b"".join(parts))
            return self.read()
        except (OSError, ValueError) as error:
            self.close()
            raise RedisError(f"connection: {error}") from error

    def read(self):
        line = self.reader.readline()
        if not line:
            raise OSError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            length = int(rest)
            if length < 0:
                return None
            data = self.reader.read(length + 2)
            return data[:-2].decode()
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        raise OSError(f"unexpected reply {line!r}")


class Watchdog:
    """Renews one lease every ttl/3 until stopped or the lease is lost."""

    def __init__(self, client, lock, owner, ttl_ms):
        self.client = client
        self.lock = lock
        self.owner = owner
        self.ttl_ms = ttl_ms
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def stop(self):
        self.stopped.set()

    def run(self):
        redis = self.client.connect()
        ttl_ms = self.ttl_ms
        confirmed = time.monotonic()
        while not self.stopped.wait(ttl_ms / 3000):
            try:
                renewed = redis.command("EVAL", RENEW, 1, self.lock, self.owner, ttl_ms)
            except RedisError as error:
                log(f"renewal of {self.owner[:8]} failed: {error}")
                if not BUG and time.monotonic() - confirmed >= ttl_ms / 1000:
                    self.lose("no renewal succeeded for a whole TTL")
                    return
                continue
            if self.stopped.is_set():
                return
            if renewed == 1:
                confirmed = time.monotonic()
                send({"notice": "renewed", "owner": self.owner})
            elif BUG:
                log(f"renewal of {self.owner[:8]} refused; carrying on")
            else:
                self.lose("renewal refused")
                return
        redis.close()

    def lose(self, why):
        self.client.leases.pop(self.owner, None)
        send({"notice": "lost", "owner": self.owner, "message": why})


class Client:
    def __init__(self, hello):
        url = urlparse(hello["server"])
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or 6379
        # A reply black-holed by a fault must not hang a call for ever: give up after a while
        # (a TTL, once the first acquire says how long that is).
        self.timeout = 1.0
        self.redis = self.connect()
        # owner -> Watchdog, for leases this client believes it holds.
        self.leases = {}

    def connect(self):
        return Redis(self.host, self.port, self.timeout)

    def acquire(self, request):
        lock, owner, ttl_ms = request["lock"], request["owner"], request["ttl_ms"]
        self.timeout = self.redis.timeout = max(ttl_ms / 1000, 0.05)
        if self.redis.command("SET", lock, owner, "NX", "PX", ttl_ms) != "OK":
            return {"result": "busy"}
        self.leases[owner] = Watchdog(self, lock, owner, ttl_ms)
        return {"result": "acquired", "owner": owner}

    def check(self, request):
        if BUG:
            held = request["owner"] in self.leases
        else:
            held = self.redis.command("GET", request["lock"]) == request["owner"]
        return {"result": "held" if held else "not-held"}

    def release(self, request):
        owner = request["owner"]
        watchdog = self.leases.pop(owner, None)
        if watchdog is not None:
            watchdog.stop()
        released = self.redis.command("EVAL", RELEASE, 1, request["lock"], owner)
        return {"result": "done" if released == 1 else "not-owner"}

    def cancel(self, request):
        watchdog = self.leases.pop(request["owner"], None)
        if watchdog is not None:
            watchdog.stop()
        return {"result": "done"}


def main():
    client = None
    for line in sys.stdin:
        request = json.loads(line)
        op, rid = request["op"], request["id"]
        if op == "hello":
            if request.get("protocol") != 2 or request.get("role") != "client":
                send({"id": rid, "error": "not-applied", "message": "I am a protocol 2 client"})
                continue
            client = Client(request)
            send({"id": rid, "result": "hello", "protocol": 2, "roles": ["client"]})
            continue
        handler = getattr(client, op, None) if client is not None else None
        if handler is None:
            send({"id": rid, "error": "not-applied", "message": f"unknown op {op}"})
            continue
        try:
            reply = handler(request)
        except RedisError as error:
            # The command may have reached Redis before the connection failed.
            reply = {"error": "unknown", "message": str(error)}
        reply["id"] = rid
        send(reply)


if __name__ == "__main__":
    main()
