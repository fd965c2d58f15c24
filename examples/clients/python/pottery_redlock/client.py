#!/usr/bin/env python3
"""pottery's `Redlock` (pottery==3.0.1, on redis==8.2.0) with one Redis master as fencer's
exec client (protocol 2, client role).

    fencer run --client 'exec:python3 examples/clients/python/pottery_redlock/client.py' \
      --lock redis://127.0.0.1:6379 ...

Each request is answered with the library's own API, as its users call it:

- acquire: `Redlock(key=name, masters={redis}, auto_release_time=ttl,
  num_extensions=NUM_EXTENSIONS)` then `lock.acquire(blocking=False)`: one attempt. pottery
  draws the lock's value itself (a UUID) and offers no public accessor for it, so the adapter
  names the lease by fencer's owner token.
- renewal: pottery has no auto-renewal; its users call `lock.extend()`, which resets the lease
  to `auto_release_time` and raises once it has been called `num_extensions` times (default
  3). This adapter runs the loop such a user writes: a thread calling `lock.extend()` every
  third of the TTL, with `num_extensions` raised so that a held lease keeps being renewed.
  Any exception from `extend` (`ExtendUnlockedLock`, which pottery also raises when Redis
  could not be reached, or `TooManyExtensions`) sends `lost`; each extend that returns sends
  `renewed`.
- check: `lock.locked()`, pottery's own ownership check: it asks Redis for the remaining TTL
  of the key if it holds this lock's value, and answers that less a clock-drift margin (0:
  not held).
- release: stops the renewal thread, then `lock.release()`; `ReleaseUnlockedLock` is
  `not-owner`.
- cancel: stops the renewal thread without releasing.

pottery catches Redis connection errors itself (`raise_on_redis_errors=False`, its default):
an acquire that cannot reach Redis returns False (`busy`), a check answers 0 (`not-held`). The
`redis.Redis` client connects to the URL in fencer's hello (the worker's proxy) with a socket
timeout of one TTL. Redis locks hand out no fencing token.
"""

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fencer_exec  # noqa: E402

NAME = "pottery_redlock"
fencer_exec.use_installed_libraries(NAME, "redis", "pottery")

import redis  # noqa: E402
from pottery import Redlock, ReleaseUnlockedLock  # noqa: E402

NUM_EXTENSIONS = 1_000_000


class Renewal:
    def __init__(self, lock, owner, ttl):
        self.lock = lock
        self.owner = owner
        self.ttl = ttl
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def stop(self):
        self.stopped.set()
        self.thread.join()

    def run(self):
        while not self.stopped.wait(self.ttl / 3):
            try:
                self.lock.extend()
            except Exception as error:  # what pottery raises when it could not extend
                fencer_exec.send_notice("lost", self.owner, f"{type(error).__name__}: {error}")
                return
            if not self.stopped.is_set():
                fencer_exec.send_notice("renewed", self.owner)


class Adapter:
    def __init__(self, hello):
        self.url = hello["server"]
        self.client = None
        self.leases = {}  # owner -> (Redlock, Renewal)

    def acquire(self, request):
        ttl = request["ttl_ms"] / 1000
        if self.client is None:
            self.client = redis.Redis.from_url(
                self.url, socket_timeout=ttl, socket_connect_timeout=ttl
            )
        lock = Redlock(
            key=request["lock"],
            masters={self.client},
            auto_release_time=ttl,
            num_extensions=NUM_EXTENSIONS,
        )
        if not lock.acquire(blocking=False):
            return {"result": "busy"}
        owner = request["owner"]
        self.leases[owner] = (lock, Renewal(lock, owner, ttl))
        return {"result": "acquired", "owner": owner}

    def check(self, request):
        lock, _ = self.leases.get(request["owner"], (None, None))
        if lock is None:
            return {"result": "not-held"}
        return {"result": "held" if lock.locked() > 0 else "not-held"}

    def release(self, request):
        lock, renewal = self.leases.pop(request["owner"], (None, None))
        if lock is None:
            return {"result": "not-owner"}
        renewal.stop()
        try:
            lock.release()
        except ReleaseUnlockedLock:
            return {"result": "not-owner"}
        return {"result": "done"}

    def cancel(self, request):
        _, renewal = self.leases.pop(request["owner"], (None, None))
        if renewal is not None:
            renewal.stop()
        return {"result": "done"}


if __name__ == "__main__":
    fencer_exec.serve(Adapter, unknown_errors=(redis.RedisError,))
