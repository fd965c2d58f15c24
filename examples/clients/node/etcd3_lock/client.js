// etcd3@1.1.2's `Lock` (etcd v3 over gRPC) as fencer's exec client (protocol 2, client role).
//
//   fencer run --client 'exec:node examples/clients/node/etcd3_lock/client.js' \
//     --lock private:etcd --ttl 1s ...   (or --lock etcd://host:port)
//
// Each request is answered with the library's own API, as its users call it:
//
// - acquire: `client.lock(name).ttl(seconds)` then `lock.acquire()`. The library grants a
//   lease of that TTL and, in one transaction, puts the key `name` on it if the key was never
//   created (`Create == 0`); otherwise it revokes the lease and rejects with
//   `EtcdLockFailedError` (`busy`). etcd takes lease TTLs in whole seconds (the library refuses
//   less than one), so the adapter refuses (`not-applied`) a TTL that is not a whole number of
//   seconds: run it with `--ttl 1s` or longer (fencer's private etcd grants leases down to 1 s).
// - renewal: the lease's own keepalive, which the library starts when it grants the lease
//   (every TTL/3 over one gRPC stream). The lease and its `lost` event are private to `Lock`:
//   a caller of `Lock` is never told that its lease ended, so the adapter sends no `lost` and
//   no `renewed` notices.
// - fencing token: none. etcd numbers every write (the key's create revision would serve), but
//   `acquire` resolves to the `Lock` itself and hands out no revision.
// - check: `Lock` has none (its documentation: "the caller may lose the lock while operations
//   may still be running"). The adapter answers what a caller of `lock.do(fn)` believes while
//   `fn` runs: `held` from the acquire until the release, whatever became of the lease.
// - release: `lock.release()`, which revokes the lease (and so deletes the key). The library
//   swallows etcd's "lease not found", so a release after the lease expired resolves too:
//   `done` either way.
// - cancel: `Lock` cannot stop its lease's keepalive without revoking it; the adapter forgets
//   the lock and the keepalive goes on until the child exits.
//
// One `Etcd3` client per child, connected to the URL in fencer's hello (the worker's proxy),
// with the library's defaults: each call is tried up to 3 times, and after 3 consecutive
// failures a circuit breaker refuses every call for 5 s ("Execution prevented because the
// circuit breaker is open"). Errors other than `EtcdLockFailedError` are answered `unknown`,
// the breaker's too: an earlier attempt of the same call may have been applied.
"use strict";
const path = require("node:path");
const exec = require(path.join(__dirname, "..", "fencer_exec.js"));

const NAME = "etcd3_lock";
const { Etcd3, EtcdLockFailedError } = exec.requireInstalled(NAME, "etcd3");

/// fencer names the server `etcd://host:port`; the library takes `http://host:port`.
function hostsOf(url) {
  return url.replace(/^etcd:\/\//, "http://");
}

exec.serve(NAME, (hello) => {
  const client = new Etcd3({ hosts: hostsOf(hello.server) });
  const leases = new Map(); // owner -> Lock

  return {
    async acquire(request) {
      if (request.ttl_ms % 1000 !== 0) {
        throw new exec.NotApplied(
          `etcd takes lease TTLs in whole seconds; ttl ${request.ttl_ms} ms is not (--ttl 1s or longer)`,
        );
      }
      const lock = client.lock(request.lock).ttl(request.ttl_ms / 1000);
      try {
        await lock.acquire();
      } catch (error) {
        if (error instanceof EtcdLockFailedError) return { result: "busy" };
        throw error;
      }
      leases.set(request.owner, lock);
      return { result: "acquired", owner: request.owner };
    },

    async check(request) {
      return { result: leases.has(request.owner) ? "held" : "not-held" };
    },

    async release(request) {
      const lock = leases.get(request.owner);
      if (!lock) return { result: "not-owner" };
      leases.delete(request.owner);
      await lock.release();
      return { result: "done" };
    },

    async cancel(request) {
      leases.delete(request.owner);
      return { result: "done" };
    },
  };
});
