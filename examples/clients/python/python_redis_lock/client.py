#!/usr/bin/env python3
"""python-redis-lock's `redis_lock.Lock` (python-redis-lock==4.0.1, on redis==8.2.0) as
fencer's exec client (protocol 2, client role).

    fencer run --client 'exec:python3 examples/clients/python/python_redis_lock/client.py' \
      --lock redis://127.0.0.1:6379 --ttl 1s ...

Each request is answered with the library's own API, as its users call it:

- acquire: `Lock(redis, name, expire=ttl, id=owner, auto_renewal=True)` (as `ObservedLock`,
  below) then
  `lock.acquire(blocking=False)`: one attempt, holding the lock (Redis key `lock:<name>`) with
  fencer's owner token as its id. The library takes `expire` in whole seconds (`int(expire)`),
  so this adapter refuses (`not-applied`) a TTL that is not a whole number of seconds: run it
  with `--ttl 1s` or longer.
- renewal: the library's own, `auto_renewal=True`: a daemon thread calling `lock.extend()`
  every two thirds of `expire`. The library offers no way to hear that a renewal failed (no
  callback, no flag): an exception in `extend` ends its renewal thread, which prints the
  traceback on stderr. So this adapter sends no `lost` and no `renewed` notices: its users
  hear nothing either. It does report what it sees the library do: `ObservedLock` is the
  library's `Lock` with `extend` overridden to call the library's own and, when Redis refuses
  it (`NotAcquired`: the key is gone or holds another id), to send `renew-refused` before the
  exception reaches the library's thread. fencer then judges whether the library told its
  caller (`silent-lease-loss`). A `ConnectionError` or `TimeoutError` is no refusal (the
  extend may have been applied) and is not reported.
- check: the library has no public "do I still hold it" call. `lock.locked()` answers whether
  the key exists, whoever holds it (its docstring: "This method returns true, even if lock
  have another id"), so this adapter asks what a user would: `lock.get_owner_id() == lock.id`,
  a GET of the key compared to this lock's id.
- release: `lock.release()`, which stops the renewal thread and deletes the key if it still
  holds this id; `NotAcquired` is `not-owner`.
- cancel: the library stops the renewal thread when the `Lock` object is garbage collected
  (its thread holds a weak reference); this adapter drops its reference without releasing.

The `redis.StrictRedis` client connects to the URL in fencer's hello (the worker's proxy) with a
socket timeout of one TTL. Redis locks hand out no fencing token.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fencer_exec  # noqa: E402

NAME = "python_redis_lock"
fencer_exec.use_installed_libraries(NAME, "redis", "redis_lock")

import redis  # noqa: E402
import redis_lock  # noqa: E402


class ObservedLock(redis_lock.Lock):
    """The library's `Lock`, unchanged but for a report of each renewal Redis refuses. Only
    the library's renewal thread calls `extend` here."""

    def extend(self, expire=None):
        try:
            return super().extend(expire=expire)
        except redis_lock.NotAcquired as refused:
            fencer_exec.report_refusal(self.id, f"NotAcquired: {refused}")
            raise


class Adapter:
    def __init__(self, hello):
        self.url = hello["server"]
        self.client = None
        self.leases = {}  # owner -> redis_lock.Lock

    def acquire(self, request):
        ttl_ms = request["ttl_ms"]
        if ttl_ms % 1000:
            raise fencer_exec.NotApplied(
                f"python-redis-lock takes expire in whole seconds; ttl {ttl_ms} ms is not (--ttl 1s or longer)"
            )
        if self.client is None:
            self.client = redis.StrictRedis.from_url(
                self.url, socket_timeout=ttl_ms / 1000, socket_connect_timeout=ttl_ms / 1000
            )
        owner = request["owner"]
        lock = ObservedLock(
            self.client, request["lock"], expire=ttl_ms // 1000, id=owner, auto_renewal=True
        )
        if not lock.acquire(blocking=False):
            return {"result": "busy"}
        self.leases[owner] = lock
        return {"result": "acquired", "owner": owner}

    def check(self, request):
        lock = self.leases.get(request["owner"])
        if lock is None:
            return {"result": "not-held"}
        # For the log only (the answer does not use it): the library's renewal thread is
        # private, and it ends without a word when `extend` raises.
        thread = lock._lock_renewal_thread
        if thread is not None and not thread.is_alive():
            fencer_exec.log(NAME, f"check of {request['owner'][:8]}: the library's renewal thread has ended")
        return {"result": "held" if lock.get_owner_id() == lock.id else "not-held"}

    def release(self, request):
        lock = self.leases.pop(request["owner"], None)
        if lock is None:
            return {"result": "not-owner"}
        try:
            lock.release()
        except redis_lock.NotAcquired:
            return {"result": "not-owner"}
        return {"result": "done"}

    def cancel(self, request):
        self.leases.pop(request["owner"], None)
        return {"result": "done"}


if __name__ == "__main__":
    fencer_exec.serve(Adapter, unknown_errors=(redis.RedisError,))
