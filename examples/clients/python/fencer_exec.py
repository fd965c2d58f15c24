"""The part of every Python adapter that is not the library: fencer's exec protocol 2, client
role (docs/exec-protocol.md), one JSON object per line on stdin and stdout.

An adapter calls `serve(Adapter)`. `Adapter(hello)` is built from fencer's hello (its
`server` is the URL of the worker's proxy, which the library must connect to); its methods
`acquire`, `check`, `release` and `cancel` take the request and return the reply's fields.
Requests are served one at a time, in order. `send_notice` may be called from any thread
(a renewal thread tells fencer `lost` and `renewed` with it).

`use_installed_libraries(...)` comes first in every adapter: it re-runs the adapter under
examples/clients/.venv/bin/python (where examples/clients/install.sh installs the pinned
libraries) and, when they are missing, prints one line on stderr and exits before the hello,
which fencer reports as a child that exited before answering hello (exit 254).
"""

import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(os.path.dirname(HERE), ".venv")
MISSING_EXIT = 3

_out = threading.Lock()


def use_installed_libraries(adapter, *modules):
    venv_python = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) != os.path.realpath(VENV):
        if not os.access(venv_python, os.X_OK):
            missing(adapter, f"{VENV} does not exist")
        os.execv(venv_python, [venv_python] + sys.argv)
    for module in modules:
        try:
            __import__(module)
        except ImportError as error:
            missing(adapter, f"cannot import {module} ({error})")


def missing(adapter, why):
    print(
        f"{adapter}: its library is not installed: {why}; run examples/clients/install.sh",
        file=sys.stderr,
        flush=True,
    )
    sys.exit(MISSING_EXIT)


def log(adapter, text):
    print(f"{adapter}: {text}", file=sys.stderr, flush=True)


def send(message):
    with _out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def send_notice(kind, owner, message=None):
    notice = {"notice": kind, "owner": owner}
    if message is not None:
        notice["message"] = message
    send(notice)


class Lost(Exception):
    """Raised by an extend step: the library says the lease is gone (sent with `lost`).
    `refused` when the server refused the extend (the lease was not this owner's): the loop
    then reports `renew-refused` first, what fencer judges `silent-lease-loss` by."""

    def __init__(self, message, refused=False):
        super().__init__(message)
        self.refused = refused


def report_refusal(owner, why):
    """Tells fencer the server refused a renewal the library made on its own (`renew-refused`,
    docs/exec-protocol.md): send it before the library acts on the refusal, and only for a
    refusal, not for a renewal whose reply was lost (it may have been applied)."""
    send_notice("renew-refused", owner, why)


class Retry(Exception):
    """Raised by an extend step: this extend failed in a way worth trying again next period."""


class RenewalThread:
    """The renewal loop a user of a library without auto-renewal writes: `extend()` every third
    of the TTL, in a thread of its own. An extend that returns sends `renewed`; one that raises
    `Lost` sends `lost` (after `renew-refused` when the server refused it) and ends the loop; one that raises `Retry` is logged and tried again at
    the next period, and `lost` is sent once no extend has succeeded for a whole TTL."""

    def __init__(self, adapter, owner, ttl, extend):
        self.adapter = adapter
        self.owner = owner
        self.ttl = ttl
        self.extend = extend
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
                self.extend()
            except Lost as why:
                if why.refused:
                    report_refusal(self.owner, str(why))
                send_notice("lost", self.owner, str(why))
                return
            except Retry as why:
                log(self.adapter, f"extend of {self.owner[:8]} failed: {why}")
                if time.monotonic() - confirmed >= self.ttl:
                    send_notice("lost", self.owner, f"no extend succeeded for a TTL: {why}")
                    return
                continue
            confirmed = time.monotonic()
            if not self.stopped.is_set():
                send_notice("renewed", self.owner)


class ExtendedLeases:
    """The requests an adapter over a `RenewalThread` answers alike, whatever its library: the
    leases by fencer's owner token, each with its lock and its renewal thread. A subclass says
    how its library answers "do I still hold it?" (`holds`) and which of its exceptions mean
    the release found the lock no longer its own (`NOT_OWNER`)."""

    NOT_OWNER = ()

    def __init__(self):
        self.leases = {}  # owner -> (lock, RenewalThread)

    def holds(self, lock):
        raise NotImplementedError

    def check(self, request):
        lock, _ = self.leases.get(request["owner"], (None, None))
        if lock is None:
            return {"result": "not-held"}
        return {"result": "held" if self.holds(lock) else "not-held"}

    def release(self, request):
        lock, renewal = self.leases.pop(request["owner"], (None, None))
        if lock is None:
            return {"result": "not-owner"}
        renewal.stop()
        try:
            lock.release()
        except self.NOT_OWNER:
            return {"result": "not-owner"}
        return {"result": "done"}

    def cancel(self, request):
        _, renewal = self.leases.pop(request["owner"], (None, None))
        if renewal is not None:
            renewal.stop()
        return {"result": "done"}


class Unknown(Exception):
    """The call may have reached the server: fencer records it `info`."""


class NotApplied(Exception):
    """The call surely did not reach the server."""


SLOW_S = 0.5


def serve(make_adapter, unknown_errors=()):
    """Serves fencer's requests until stdin closes. Exceptions of the types in
    `unknown_errors` (the library's connection and timeout errors) are answered `unknown`.
    A request that took longer than SLOW_S is logged on stderr with its answer: fencer may
    have recorded it `info` (unanswered) meanwhile."""
    adapter = None
    for line in sys.stdin:
        request = json.loads(line)
        op, rid = request.get("op"), request["id"]
        if op == "hello":
            if request.get("protocol") != 2 or request.get("role") != "client":
                send({"id": rid, "error": "not-applied", "message": "this is a protocol 2 client"})
                continue
            adapter = make_adapter(request)
            send({"id": rid, "result": "hello", "protocol": 2, "roles": ["client"]})
            continue
        handler = getattr(adapter, op, None) if op in ("acquire", "check", "release", "cancel") else None
        if adapter is None or handler is None:
            send({"id": rid, "error": "not-applied", "message": f"unknown op {op}"})
            continue
        started = time.monotonic()
        try:
            reply = handler(request)
        except NotApplied as error:
            reply = {"error": "not-applied", "message": str(error)}
        except Unknown as error:
            reply = {"error": "unknown", "message": str(error)}
        except unknown_errors as error:
            reply = {"error": "unknown", "message": f"{type(error).__name__}: {error}"}
        took = time.monotonic() - started
        if took > SLOW_S:
            owner = request.get("owner", "")[:8]
            answer = reply.get("result") or reply.get("error")
            print(f"slow {op} of {owner}: {answer} after {took * 1000:.0f} ms", file=sys.stderr, flush=True)
        reply["id"] = rid
        send(reply)
    # fencer closes stdin when the run ends, and the pipe closes when fencer is gone: leave
    # then, even while a library's own threads still run (kazoo's connection thread is not a
    # daemon, and would keep its session, and with it a lock, alive).
    sys.stdout.flush()
    os._exit(0)
