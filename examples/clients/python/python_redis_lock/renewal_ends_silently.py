#!/usr/bin/env python3
"""Shows python-redis-lock's auto-renewal ending for good, without a word to its caller, after
one renewal fails to reach Redis.

    examples/clients/.venv/bin/python \
      examples/clients/python/python_redis_lock/renewal_ends_silently.py [redis://127.0.0.1:6379 [CUT_SECONDS]]

A caller takes `Lock(redis, name, expire=4, auto_renewal=True)` (renewed every 2.67 s)
through a TCP forwarder. 5 s later the forwarder closes every connection and refuses new ones
for CUT_SECONDS (default 1.3, as a network cut does), so the renewal due at 5.33 s fails while
the lease, last renewed at 2.67 s, is still live until 6.67 s; then it lets connections
through again. The script prints, at each step, whether the library's renewal
thread is alive, who Redis says holds the lock, and whether a second client can take it.
"""

import socket
import sys
import threading
import time
from urllib.parse import urlparse

import redis
import redis_lock

url = urlparse(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379")
EXPIRE_S = 4
CUT_S = float(sys.argv[2]) if len(sys.argv) > 2 else 1.3
target = (url.hostname or "127.0.0.1", url.port or 6379)
cut = threading.Event()
connections = []


def pipe(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    for s in (source, sink):
        try:
            s.close()
        except OSError:
            pass


def forwarder(listener):
    while True:
        client, _ = listener.accept()
        if cut.is_set():
            client.close()
            continue
        upstream = socket.create_connection(target)
        connections.extend([client, upstream])
        threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()


listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
threading.Thread(target=forwarder, args=(listener,), daemon=True).start()
port = listener.getsockname()[1]

start = time.monotonic()


def say(text):
    print(f"{time.monotonic() - start:5.2f}s  {text}", flush=True)


name = f"renewal-demo-{int(time.time())}"
through_forwarder = redis.StrictRedis(host="127.0.0.1", port=port, socket_timeout=1)
direct = redis.StrictRedis(host=target[0], port=target[1])
lock = redis_lock.Lock(through_forwarder, name, expire=EXPIRE_S, auto_renewal=True)
say(f"acquire: {lock.acquire(blocking=False)}")


def state():
    thread = lock._lock_renewal_thread
    alive = thread is not None and thread.is_alive()
    holder = direct.get(f"lock:{name}")
    ours = holder is not None and holder.decode() == lock.id
    say(f"renewal thread alive: {alive}; Redis says the lock is held by this caller: {ours}")


time.sleep(5.0)
state()
say(f"cut: every connection through the forwarder is closed and new ones refused for {CUT_S} s")
cut.set()
for s in connections:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
time.sleep(CUT_S)
cut.clear()
say("healed")
for _ in range(6):
    state()
    time.sleep(0.5)
other = redis_lock.Lock(direct, name, expire=EXPIRE_S)
say(f"a second client's acquire: {other.acquire(blocking=False)}")
say("the first caller was told nothing; its next call is release():")
try:
    lock.release()
    say("release: ok")
except redis_lock.NotAcquired as error:
    say(f"release: NotAcquired: {error}")
other.release()
