// The adapter shared by `redlock` (5.0.0-beta.2) and its fork `@sesamecare-oss/redlock`
// (1.4.0): the same `Redlock` class and the same auto-extending `using` API.
//
// Each request is answered with the library's own API, as its users call it:
//
// - acquire: `redlock.using([name], ttl, { automaticExtensionThreshold }, routine)` on a `Redlock`
//   built over one ioredis client per master with `retryCount: 0` (one attempt; the README says
//   "for many tasks it's sufficient to attempt a lock with `retryCount=0`"). The routine's start is
//   the grant: the adapter answers `acquired` and keeps the routine running until fencer's release.
//   The library draws the lock's value itself; the adapter names the lease by fencer's owner token.
//   An acquire refused by Redis (every vote a ResourceLockedError) is `busy`; any other failure is
//   an error.
// - renewal: the library's own. `using` extends the lock when less than
//   `automaticExtensionThreshold` of it is left; this adapter sets that threshold to two
//   thirds of the TTL, so an extension is sent once a third of the lease has passed (the
//   library requires the threshold to be at least 100 ms below the TTL). When an extension
//   fails and the lock has expired by the library's clock, `using` aborts its AbortSignal with
//   the error: the adapter sends `lost` then. The library says nothing on a successful
//   extension, so no `renewed` notices are sent.
// - check: redlock has no ownership query (its README: it "is not designed to report the
//   ownership status of a resource"). Its README's pattern inside the routine is
//   `if (signal.aborted) throw signal.error`: the adapter answers `not-held` when the signal
//   is aborted and `held` otherwise.
// - release: ends the routine; `using` then stops its extension timer and releases. A
//   release refused by Redis (the key no longer holds this value) rejects `using`: that is
//   `not-owner`.
// - cancel: `using` offers no way to stop the extensions except ending the routine, which
//   releases the lock. The adapter does that, and says so on stderr.
//
// The ioredis clients connect to the URL in fencer's hello (the worker's proxies) with ioredis's
// defaults: `redis://host:port` is one master, `redlock://host:port,host:port,...` (a Redlock
// cluster fencer started) one master per address, the library's quorum deciding. Redis locks
// hand out no fencing token.
"use strict";
const path = require("node:path");
const exec = require(path.join(__dirname, "fencer_exec.js"));


async function refusedByRedis(error, ResourceLockedError) {
  // ExecutionError.attempts holds promises of each attempt's votes.
  if (!error || !Array.isArray(error.attempts) || error.attempts.length === 0) return false;
  const stats = await Promise.all(error.attempts);
  return stats.every(
    (s) =>
      s.votesFor.size === 0 &&
      s.votesAgainst.size > 0 &&
      [...s.votesAgainst.values()].every((e) => e instanceof ResourceLockedError),
  );
}

// One `redis://` URL per master the hello's server names: itself for `redis://`, each address
// of a `redlock://host:port,host:port[?query]` (the query is fencer's, not Redis's).
function masterUrls(server) {
  const [scheme, rest] = server.split("://", 2);
  if (scheme !== "redlock") return [server];
  const hosts = rest.split("?")[0].split("/")[0];
  return hosts.split(",").map((host) => `redis://${host}`);
}

function run(name, pkg) {
  const lib = exec.requireInstalled(name, pkg);
  const Redis = exec.requireInstalled(name, "ioredis");
  const Redlock = lib.default || lib.Redlock || lib;
  const { ResourceLockedError } = lib;

  exec.serve(name, (hello) => {
    const clients = masterUrls(hello.server).map((url) => {
      const client = new Redis(url);
      client.on("error", (error) => exec.log(name, `ioredis ${url}: ${error.message}`));
      return client;
    });
    const redlock = new Redlock(clients, { retryCount: 0 });
    const leases = new Map(); // owner -> { signal, finish, done }

    return {
      async acquire(request) {
        const ttl = request.ttl_ms;
        const owner = request.owner;
        const threshold = Math.min(Math.round((ttl * 2) / 3), ttl - 100);
        let granted;
        const started = new Promise((resolve) => (granted = resolve));
        const lease = {};
        lease.done = redlock.using([request.lock], ttl, { automaticExtensionThreshold: threshold }, (signal) => {
          lease.signal = signal;
          signal.addEventListener("abort", () => {
            const why = signal.error ? `${signal.error.name}: ${signal.error.message}` : "aborted";
            exec.notice("lost", owner, why);
          });
          const finished = new Promise((resolve) => (lease.finish = resolve));
          granted(true);
          return finished;
        });
        const outcome = await Promise.race([started, lease.done.then(() => false, (error) => error)]);
        if (outcome === true) {
          leases.set(owner, lease);
          return { result: "acquired", owner };
        }
        if (await refusedByRedis(outcome, ResourceLockedError)) return { result: "busy" };
        throw outcome instanceof Error ? outcome : new Error(String(outcome));
      },

      async check(request) {
        const lease = leases.get(request.owner);
        return { result: lease && !lease.signal.aborted ? "held" : "not-held" };
      },

      async release(request) {
        const lease = leases.get(request.owner);
        if (!lease) return { result: "not-owner" };
        leases.delete(request.owner);
        lease.finish();
        try {
          await lease.done;
        } catch (error) {
          if (await refusedByRedis(error, ResourceLockedError)) return { result: "not-owner" };
          throw error;
        }
        return { result: "done" };
      },

      async cancel(request) {
        const lease = leases.get(request.owner);
        if (lease) {
          leases.delete(request.owner);
          exec.log(name, "cancel: `using` stops extending only by ending its routine, which releases the lock");
          lease.finish();
          lease.done.catch(() => {});
        }
        return { result: "done" };
      },
    };
  });
}

module.exports = { run };
