// redis-semaphore@5.8.0's `Mutex` (on ioredis) as fencer's exec client (protocol 2, client
// role).
//
//   fencer run --client 'exec:node examples/clients/node/redis_semaphore/client.js' \
//     --lock redis://127.0.0.1:6379 ...
//
// Each request is answered with the library's own API, as its users call it:
//
// - acquire: `new Mutex(redis, name, { lockTimeout: ttl, acquireAttemptsLimit: 1, identifier:
//   owner, onLockLost })` then `mutex.tryAcquire()`: one attempt (the README's "Example with
//   optional lock"), holding the key `mutex:<name>` with fencer's owner token as its
//   identifier.
// - renewal: the library's own auto-refresh, at its default `refreshInterval` (0.8 of
//   `lockTimeout`). When a refresh finds the key no longer holds the identifier, the library
//   calls `onLockLost`: the adapter sends `lost` then. The library says nothing on a
//   successful refresh, so no `renewed` notices are sent.
// - check: `mutex.isAcquired`, the README's pattern (`while (mutex.isAcquired) { ... }`): a
//   flag the library sets at acquire and clears at release or when a refresh finds the lock
//   lost. It does not ask Redis.
// - release: `mutex.release()`, which stops the refresh and deletes the key if it holds the
//   identifier. It resolves whether or not the key held it (the README: "if lock is no longer
//   belongs to this mutex, .release() will have no effect"), so the adapter answers `done`.
// - cancel: `mutex.stopRefresh()`, without releasing.
//
// The ioredis client connects to the URL in fencer's hello (the worker's proxy) with ioredis's
// defaults. Redis locks hand out no fencing token.
"use strict";
const path = require("node:path");
const exec = require(path.join(__dirname, "..", "fencer_exec.js"));

const NAME = "redis_semaphore";
const { Mutex } = exec.requireInstalled(NAME, "redis-semaphore");
const Redis = exec.requireInstalled(NAME, "ioredis");

exec.serve(NAME, (hello) => {
  const client = new Redis(hello.server);
  client.on("error", (error) => exec.log(NAME, `ioredis: ${error.message}`));
  const leases = new Map(); // owner -> Mutex

  return {
    async acquire(request) {
      const owner = request.owner;
      const mutex = new Mutex(client, request.lock, {
        lockTimeout: request.ttl_ms,
        acquireAttemptsLimit: 1,
        identifier: owner,
        onLockLost(error) {
          exec.notice("lost", owner, `${error.name}: ${error.message}`);
        },
      });
      if (!(await mutex.tryAcquire())) return { result: "busy" };
      leases.set(owner, mutex);
      return { result: "acquired", owner };
    },

    async check(request) {
      const mutex = leases.get(request.owner);
      return { result: mutex && mutex.isAcquired ? "held" : "not-held" };
    },

    async release(request) {
      const mutex = leases.get(request.owner);
      if (!mutex) return { result: "not-owner" };
      leases.delete(request.owner);
      await mutex.release();
      return { result: "done" };
    },

    async cancel(request) {
      const mutex = leases.get(request.owner);
      if (mutex) {
        leases.delete(request.owner);
        mutex.stopRefresh();
      }
      return { result: "done" };
    },
  };
});
