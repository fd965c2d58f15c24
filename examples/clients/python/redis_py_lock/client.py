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
  library saying the lock is no longer ours) sends `renew-refused` (what the server said) and
  `lost` (what the loop tells its caller); a connection or timeout error is
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fencer_exec  # noqa: E402

NAME = "redis_py_lock"
fencer_exec.use_installed_libraries(NAME, "redis")

import redis  # noqa: E402
from redis.exceptions import LockNotOwnedError  # noqa: E402


def extend_step(lock, ttl):
    """One extend of the loop a redis-py user writes: `LockNotOwnedError` means the lease is
    gone; a connection or timeout error is worth another try."""

    def extend():
        try:
            lock.extend(ttl, replace_ttl=True)
        except LockNotOwnedError as error:
            raise fencer_exec.Lost(f"LockNotOwnedError: {error}", refused=True) from error
        except redis.RedisError as error:
            raise fencer_exec.Retry(f"{type(error).__name__}: {error}") from error

    return extend


class Adapter(fencer_exec.ExtendedLeases):
    NOT_OWNER = (LockNotOwnedError,)

    def __init__(self, hello):
        super().__init__()
        self.url = hello["server"]
        self.client = None

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
        renewal = fencer_exec.RenewalThread(NAME, owner, ttl, extend_step(lock, ttl))
        self.leases[owner] = (lock, renewal)
        return {"result": "acquired", "owner": owner}

    def holds(self, lock):
        return lock.owned()


if __name__ == "__main__":
    fencer_exec.serve(Adapter, unknown_errors=(redis.RedisError,))
