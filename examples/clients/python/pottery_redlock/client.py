#!/usr/bin/env python3
"""pottery's `Redlock` (pottery==3.0.1, on redis==8.2.0) with one Redis master, or Redlock's
independent masters, as fencer's exec client (protocol 2, client role).

    fencer run --client 'exec:python3 examples/clients/python/pottery_redlock/client.py' \
      --lock redis://127.0.0.1:6379 ...          # one master
    fencer run --client 'exec:python3 examples/clients/python/pottery_redlock/client.py' \
      --lock private:redlock ...                 # five masters fencer starts

Each request is answered with the library's own API, as its users call it:

- acquire: `Redlock(key=name, masters={redis, ...}, auto_release_time=ttl,
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
`redis.Redis` clients connect to the URL in fencer's hello (the worker's proxies) with a socket
timeout of one TTL: `redis://host:port` is one master, `redlock://host:port,host:port,...` (a
Redlock cluster fencer started) one master per address, pottery's quorum rule deciding. Redis
locks hand out no fencing token.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fencer_exec  # noqa: E402

NAME = "pottery_redlock"
fencer_exec.use_installed_libraries(NAME, "redis", "pottery")

import redis  # noqa: E402
from pottery import Redlock, ReleaseUnlockedLock  # noqa: E402

NUM_EXTENSIONS = 1_000_000


def extend_step(lock):
    """One extend of the loop a pottery user writes: whatever `extend` raises means the lease
    is gone (`ExtendUnlockedLock`, which pottery also raises when Redis could not be reached,
    or `TooManyExtensions`). Since the same exception may mean Redis was not reached, the loop
    reports no `renew-refused` for it."""

    def extend():
        try:
            lock.extend()
        except Exception as error:  # what pottery raises when it could not extend
            raise fencer_exec.Lost(f"{type(error).__name__}: {error}") from error

    return extend


def master_urls(server):
    """One `redis://` URL per master the hello's server names: itself for `redis://`, each
    address of a `redlock://host:port,host:port[?query]` (the query is fencer's, not Redis's)."""
    scheme, rest = server.split("://", 1)
    if scheme != "redlock":
        return [server]
    hosts = rest.split("?", 1)[0].split("/", 1)[0]
    return [f"redis://{host}" for host in hosts.split(",")]


class Adapter(fencer_exec.ExtendedLeases):
    NOT_OWNER = (ReleaseUnlockedLock,)

    def __init__(self, hello):
        super().__init__()
        self.urls = master_urls(hello["server"])
        self.masters = None

    def acquire(self, request):
        ttl = request["ttl_ms"] / 1000
        if self.masters is None:
            self.masters = {
                redis.Redis.from_url(url, socket_timeout=ttl, socket_connect_timeout=ttl)
                for url in self.urls
            }
        lock = Redlock(
            key=request["lock"],
            masters=self.masters,
            auto_release_time=ttl,
            num_extensions=NUM_EXTENSIONS,
        )
        if not lock.acquire(blocking=False):
            return {"result": "busy"}
        owner = request["owner"]
        renewal = fencer_exec.RenewalThread(NAME, owner, ttl, extend_step(lock))
        self.leases[owner] = (lock, renewal)
        return {"result": "acquired", "owner": owner}

    def holds(self, lock):
        return lock.locked() > 0


if __name__ == "__main__":
    fencer_exec.serve(Adapter, unknown_errors=(redis.RedisError,))
