// redlock@5.0.0-beta.2 (auto-extending `using`) as fencer's exec client (protocol 2, client
// role); what each request does is described in ../redlock_using.js.
//
//   fencer run --client 'exec:node examples/clients/node/redlock/client.js' \
//     --lock redis://127.0.0.1:6379 ...
"use strict";
require("../redlock_using.js").run("redlock", "redlock");
