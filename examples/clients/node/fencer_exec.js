// The part of every Node adapter that is not the library: fencer's exec protocol 2, client
// role (docs/exec-protocol.md), one JSON object per line on stdin and stdout.
//
// An adapter calls `serve(name, makeAdapter)`. `makeAdapter(hello)` is called with fencer's
// hello (its `server` is the URL of the worker's proxy, which the library must connect to) and
// returns an object whose async methods `acquire`, `check`, `release` and `cancel` take the
// request and return the reply's fields. Requests are served concurrently; replies carry their
// request's id. `notice(kind, owner, message)` tells fencer `lost` or `renewed`.
//
// `requireInstalled(name, pkg)` loads a package from examples/clients/node/node_modules (where
// examples/clients/install.sh installs the pinned versions); when it is missing it prints one
// line on stderr and exits before the hello, which fencer reports as a child that exited
// before answering hello (exit 254).
"use strict";
const readline = require("node:readline");

const MISSING_EXIT = 3;
const SLOW_MS = 500;

function requireInstalled(name, pkg) {
  try {
    return require(pkg);
  } catch (error) {
    if (error && error.code === "MODULE_NOT_FOUND") {
      process.stderr.write(
        `${name}: its library is not installed: cannot load ${pkg}; run examples/clients/install.sh\n`,
      );
      process.exit(MISSING_EXIT);
    }
    throw error;
  }
}

function send(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

function notice(kind, owner, message) {
  const line = { notice: kind, owner };
  if (message !== undefined) line.message = message;
  send(line);
}

function log(name, text) {
  process.stderr.write(`${name}: ${text}\n`);
}

// An error whose call may have reached the server (recorded `info`), or surely did not.
class Unknown extends Error {}
class NotApplied extends Error {}

function serve(name, makeAdapter) {
  let adapter = null;
  const input = readline.createInterface({ input: process.stdin });
  input.on("line", async (line) => {
    const request = JSON.parse(line);
    const id = request.id;
    if (request.op === "hello") {
      if (request.protocol !== 2 || request.role !== "client") {
        send({ id, error: "not-applied", message: "this is a protocol 2 client" });
        return;
      }
      adapter = makeAdapter(request);
      send({ id, result: "hello", protocol: 2, roles: ["client"] });
      return;
    }
    if (adapter === null || !["acquire", "check", "release", "cancel"].includes(request.op)) {
      send({ id, error: "not-applied", message: `unknown op ${request.op}` });
      return;
    }
    const started = Date.now();
    let reply;
    try {
      reply = await adapter[request.op](request);
    } catch (error) {
      const kind = error instanceof NotApplied ? "not-applied" : "unknown";
      reply = { error: kind, message: `${error && error.name}: ${error && error.message}` };
    }
    // A request that took longer than SLOW_MS is logged with its answer: fencer may have
    // recorded it `info` (unanswered) meanwhile.
    const took = Date.now() - started;
    if (took > SLOW_MS) {
      const owner = (request.owner || "").slice(0, 8);
      log(name, `slow ${request.op} of ${owner}: ${reply.result || reply.error} after ${took} ms`);
    }
    send({ id, ...reply });
  });
  // fencer closes stdin when the run ends: exit even though timers and sockets are open.
  input.on("close", () => process.exit(0));
}

module.exports = { requireInstalled, serve, notice, log, Unknown, NotApplied };
