// @sesamecare-oss/redlock@1.4.0 (a maintained fork of redlock 5 with the same auto-extending
// `using`) as fencer's exec client (protocol 2, client role); what each request does is
// described in ../redlock_using.js.
//
//   fencer run --client 'exec:node examples/clients/node/sesamecare_redlock/client.js' \
//     --lock redis://127.0.0.1:6379 ...
"use strict";
require("../redlock_using.js").run("sesamecare_redlock", "@sesamecare-oss/redlock");
