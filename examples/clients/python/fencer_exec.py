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
