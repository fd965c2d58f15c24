#!/usr/bin/env python3
"""redis-py's `Lock` (redis==8.2.0) as fencer's exec client (protocol 2, client role).

    fencer run --client 'exec:python3 examples/clients/python/redis_py_lock/client.py' \
      --lock redis://127.0.0.1:6379 ...

Each request is answered with the library's own API, as its users call it:

- acquire: `redis.lock(name, timeout=ttl, thread_local=False)` then
  `lock.acquire(blocking=False, token=owner)`: one attempt, holding the lock with fencer's
  owner token as its value. `thread_local=False` because another thread (the renewal thread
  below) uses the lock's token; the `Lock` docstring names this case.
- renewal: redis-py's `Lock` has no auto-renewal. Its users renew with `Lock.extend`, so this
  adapter runs the loop such a user writes: a thread calling
  `lock.extend(ttl, replace_ttl=True)` every third of the TTL. `LockNotOwnedError` (the
  library saying the lock is no longer ours) sends `lost`; a connection or timeout error is
  logged and retried at the next period, and `lost` is sent once no extend has succeeded for a
  whole TTL. Each successful extend sends `renewed`.
- check: `lock.owned()`, which asks Redis whether the key holds this lock's token.
- release: stops the renewal thread, then `lock.release()`; `LockNotOwnedError` is
  `not-owner`.
- cancel: stops the renewal thread without releasing.

The `redis.Redis` client connects to the URL in fencer's hello (the worker's proxy) with a
socket timeout of one TTL, set at the first acquire. Redis locks hand out no fencing token.
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fencer_exec  # noqa: E402

NAME = "redis_py_lock"
fencer_exec.use_installed_libraries(NAME, "redis")

import redis  # noqa: E402
from redis.exceptions import LockNotOwnedError  # noqa: E402


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
        if self.thread is not threading.current_thread():
            self.thread.join()

    def run(self):
        confirmed = time.monotonic()
        while not self.stopped.wait(self.ttl / 3):
            try:
                self.lock.extend(self.ttl, replace_ttl=True)
            except LockNotOwnedError as error:
                fencer_exec.send_notice("lost", self.owner, f"LockNotOwnedError: {error}")
                return
            except redis.RedisError as error:
                fencer_exec.log(NAME, f"extend of {self.owner[:8]} failed: {type(error).__name__}: {error}")
                if time.monotonic() - confirmed >= self.ttl:
                    fencer_exec.send_notice("lost", self.owner, f"no extend succeeded for a TTL: {error}")
                    return
                continue
            confirmed = time.monotonic()
            if not self.stopped.is_set():
                fencer_exec.send_notice("renewed", self.owner)


class Adapter:
    def __init__(self, hello):
        self.url = hello["server"]
        self.client = None
        self.leases = {}  # owner -> (Lock, Renewal)

    def acquire(self, request):
        ttl = request["ttl_ms"] / 1000
        if self.client is None:
            self.client = redis.Redis.from_url(
                self.url, socket_timeout=ttl, socket_connect_timeout=ttl
            )
        lock = self.client.lock(request["lock"], timeout=ttl, thread_local=False)
        if not lock.acquire(blocking=False, token=request["owner"]):
            return {"result": "busy"}
        owner = request["owner"]
        self.leases[owner] = (lock, Renewal(lock, owner, ttl))
        return {"result": "acquired", "owner": owner}

    def check(self, request):
        lock, _ = self.leases.get(request["owner"], (None, None))
        if lock is None:
            return {"result": "not-held"}
        return {"result": "held" if lock.owned() else "not-held"}

    def release(self, request):
        lock, renewal = self.leases.pop(request["owner"], (None, None))
        if lock is None:
            return {"result": "not-owner"}
        renewal.stop()
        try:
            lock.release()
        except LockNotOwnedError:
            return {"result": "not-owner"}
        return {"result": "done"}

    def cancel(self, request):
        _, renewal = self.leases.pop(request["owner"], (None, None))
        if renewal is not None:
            renewal.stop()
        return {"result": "done"}


if __name__ == "__main__":
    fencer_exec.serve(Adapter, unknown_errors=(redis.RedisError,))
