#!/usr/bin/env python3
"""kazoo's `Lock` (kazoo==2.11.0, ZooKeeper) as fencer's exec client (protocol 2, client role).

    fencer run --client 'exec:python3 examples/clients/python/kazoo_lock/client.py' \
      --lock private:zookeeper --ttl 1s --call-timeout 10s ...   (or --lock zk://host:port)

Each request is answered with the library's own API, as its users call it:

- the lease: kazoo has no lease renewal of its own. The lease is the ZooKeeper *session*, kept
  alive by pings from kazoo's connection thread; its timeout plays the TTL. One
  `KazooClient(hosts=<host:port of fencer's hello>, timeout=ttl)` per child, started at the
  first acquire (the TTL comes with it): `timeout` is the session timeout kazoo asks for, and
  ZooKeeper clamps it to [2, 20] x tickTime (fencer's private ZooKeeper: tick 50 ms, so 100 ms
  to 1 s). kazoo's own log line "Session created ... negotiated session timeout" (on stderr)
  shows what the server granted. kazoo pings an idle session every 10 to 400 ms (a random
  jitter, whatever the timeout), so sessions much shorter than a second expire with no fault
  at all: use `--ttl 1s`. `command_retry` and `connection_retry` are given so that a retried
  call gives up after a quarter of the TTL (kazoo's default retries for ever) and reconnects
  are not backed off past one TTL.
- acquire: `client.Lock(path, identifier=owner)` then `lock.acquire(timeout=ttl / 4)`. kazoo
  creates an ephemeral sequential node `<path>/<uuid>__lock__<seq>` and holds the lock when no
  contender has a lower sequence number; otherwise it waits up to the timeout for its
  predecessor to go, then raises `LockTimeout` and deletes its node (`busy`). False (kazoo's
  retry deadline passed while the connection was down; a node may have been created) is
  `unknown`. (`acquire(blocking=False)` cannot take a timeout in kazoo 2.11, and retries a
  lost connection for ever.) The timeout does not bound a call made while kazoo reconnects:
  kazoo queues it until a connection is made, so an acquire can take seconds; give fencer a
  call timeout that waits for it (an acquire fencer gave up on and kazoo then granted is held
  by the live session, with nobody to release it, until the run ends).
- fencing token: the sequence number of the lock's node (`lock.node`, after `__lock__`).
  ZooKeeper numbers a parent's children in creation order and kazoo grants the lowest, so each
  grant's number is greater than every earlier grant's on that path. kazoo does not call it a
  fencing token; the adapter reads it off the node name.
- ownership check and `lost`: `lock.is_acquired` is a local flag that kazoo never clears when
  the session goes (only `release` does). kazoo tells of the session through connection state
  listeners, which its documentation recommends for `Lock`; the adapter adds one:
  * LOST (the session expired, or the client closed): every lease of this client is gone:
    `lost` is sent for each. kazoo then opens a new session by itself; old leases stay lost.
  * SUSPENDED (the connection dropped; the session may still be alive, or already expired on
    the server): kazoo's `KazooState` documentation says "a client should not assume that
    locks are valid during this time". No notice (the lease may well survive), but `check`
    answers `not-held` while the state is not CONNECTED; back to CONNECTED with the same
    session, the leases are held again.
  So `check` is `lock.is_acquired`, state CONNECTED and no LOST since the acquire: the
  library's belief, with no server round trip.
- release: `lock.release()`: True is `done`, False (kazoo did not think it held the lock)
  `not-owner`. kazoo swallows `NoNodeError`, so a release after the session expired is `done`.
- cancel: forgets the lease without releasing. kazoo has nothing to stop: the node stays, held
  by this client's live session, until the session ends.

kazoo's errors (`KazooException`, its `KazooTimeoutError`) are answered `unknown`; a failed
first connection is `not-applied`. `Handler` below only swaps kazoo's `time.sleep` for an
Event wait, for libfaketime's sake (see there).
"""

import logging
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fencer_exec  # noqa: E402

NAME = "kazoo_lock"
fencer_exec.use_installed_libraries(NAME, "kazoo")

from kazoo.client import KazooClient, KazooState  # noqa: E402
from kazoo.exceptions import KazooException, LockTimeout  # noqa: E402
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler  # noqa: E402
from kazoo.retry import KazooRetry  # noqa: E402

# kazoo's own log on stderr (fencer shows it): connection drops and session expiries (WARNING),
# and the line kazoo logs below DEBUG when a session is created, with the session timeout the
# server granted (kazoo keeps that value to itself).
BLATHER = 5
KAZOO_LOG = logging.getLogger(NAME)
KAZOO_LOG.setLevel(BLATHER)
KAZOO_LOG.propagate = False
_stderr = logging.StreamHandler(sys.stderr)
_stderr.setFormatter(logging.Formatter(f"{NAME}: kazoo %(levelname)s %(message)s"))
_stderr.addFilter(
    lambda record: record.levelno >= logging.WARNING
    or record.getMessage().startswith("Session created")
)
KAZOO_LOG.addHandler(_stderr)


def event_sleep(seconds):
    threading.Event().wait(seconds)


class Handler(SequentialThreadingHandler):
    """kazoo's default threading handler, sleeping on an Event instead of `time.sleep`.

    Not a change to the library's logic: fencer starts each client child under libfaketime (to
    step its wall clock for `skew`), and libfaketime 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC=1
    fails `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` with EINVAL, which is how Python
    3.11's `time.sleep` sleeps. kazoo sleeps with its handler's `sleep_func` between retries
    (connection, commands, `Lock.acquire`); `time.sleep` there raised `OSError: [Errno 22]` in
    kazoo's connection thread, which then died, and the client never reconnected."""

    sleep_func = staticmethod(event_sleep)


ROOT = "/fencer-kazoo"


def hosts_of(url):
    """`zk://[user@]host:port[,host:port][/chroot][?query]` as kazoo's `hosts` string."""
    rest = url.split("://", 1)[1] if "://" in url else url
    rest = rest.split("?", 1)[0]
    authority, slash, chroot = rest.partition("/")
    authority = authority.rsplit("@", 1)[-1]
    return authority + (slash + chroot if chroot else "")


def path_of(lock):
    """The ZooKeeper path for fencer's lock name (its '/' and '%' escaped: one znode)."""
    return ROOT + "/" + lock.replace("%", "%25").replace("/", "%2F")


def token_of(node):
    """The sequence number of a kazoo lock node `<uuid>__lock__<seq>` (None if unreadable)."""
    try:
        seq = int(node.rsplit("__lock__", 1)[1])
    except (AttributeError, IndexError, ValueError):
        return None
    return seq if seq >= 0 else None


class Lease:
    def __init__(self, lock):
        self.lock = lock
        self.lost = False


class Adapter:
    def __init__(self, hello):
        self.hosts = hosts_of(hello["server"])
        self.client = None
        self.ttl = None
        self.guard = threading.Lock()
        self.leases = {}  # owner -> Lease

    def connect(self, ttl):
        if self.client is not None:
            if ttl != self.ttl:
                fencer_exec.log(NAME, f"TTL {ttl}s asked, the session was opened with {self.ttl}s")
            return
        handler = Handler()
        client = KazooClient(
            hosts=self.hosts,
            timeout=ttl,
            handler=handler,
            command_retry=KazooRetry(max_tries=-1, deadline=ttl / 4, sleep_func=handler.sleep_func),
            connection_retry=KazooRetry(
                max_tries=-1, delay=0.05, max_delay=ttl, sleep_func=handler.sleep_func
            ),
            logger=KAZOO_LOG,
        )
        client.add_listener(self.on_state)
        try:
            client.start(timeout=max(ttl, 1.0))
        except KazooTimeoutError as error:
            raise fencer_exec.NotApplied(f"cannot connect to {self.hosts}: {error}") from error
        self.client, self.ttl = client, ttl

    def on_state(self, state):
        """kazoo's connection state listener (runs in kazoo's connection thread)."""
        if state == KazooState.LOST:
            with self.guard:
                gone = [owner for owner, lease in self.leases.items() if not lease.lost]
                for owner in gone:
                    self.leases[owner].lost = True
            for owner in gone:
                fencer_exec.send_notice("lost", owner, "kazoo state LOST: the session is gone")
        elif state == KazooState.SUSPENDED:
            fencer_exec.log(NAME, "kazoo state SUSPENDED: checks answer not-held until CONNECTED")
        return False

    def acquire(self, request):
        ttl = request["ttl_ms"] / 1000
        self.connect(ttl)
        owner = request["owner"]
        lock = self.client.Lock(path_of(request["lock"]), owner)
        try:
            gotten = lock.acquire(timeout=self.ttl / 4)
        except LockTimeout:
            return {"result": "busy"}
        if not gotten:
            raise fencer_exec.Unknown("acquire returned False: retry deadline passed while disconnected")
        # A LOST that kazoo reports between `acquire` returning and the next line marks no lease
        # (and sends no `lost`): a narrow window, left open, not seen in the recorded runs.
        with self.guard:
            self.leases[owner] = Lease(lock)
        reply = {"result": "acquired", "owner": owner}
        token = token_of(lock.node)
        if token is not None:
            reply["fencing_token"] = token
        else:
            fencer_exec.log(NAME, f"no sequence number in lock node {lock.node!r}")
        return reply

    def check(self, request):
        with self.guard:
            lease = self.leases.get(request["owner"])
        if lease is None or lease.lost:
            return {"result": "not-held"}
        held = lease.lock.is_acquired and self.client.state == KazooState.CONNECTED
        # LOST may have come while reading the state: look again.
        return {"result": "held" if held and not lease.lost else "not-held"}

    def release(self, request):
        with self.guard:
            lease = self.leases.pop(request["owner"], None)
        if lease is None:
            return {"result": "not-owner"}
        return {"result": "done" if lease.lock.release() else "not-owner"}

    def cancel(self, request):
        with self.guard:
            self.leases.pop(request["owner"], None)
        return {"result": "done"}


if __name__ == "__main__":
    fencer_exec.serve(Adapter, unknown_errors=(KazooException, KazooTimeoutError))
