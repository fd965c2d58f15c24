//! fencer's whole command line over a user's own lock client library: the library of
//! `examples/custom_client.rs` registered as `--client watchdog-lock` (and, with its cached
//! ownership check, `--client watchdog-lock-cached`), so `run`, `gate`, `replay`, `shrink` and
//! the rest take it like one of fencer's own.
//!
//! ```sh
//! cargo run --release --example client_cli -- gate --client watchdog-lock --seeds 0..200
//! ```

#[path = "custom_client.rs"]
#[allow(dead_code)] // its `main` is the other example's
mod custom_client;

use std::process::ExitCode;

use fencer::{Cli, Time};

fn main() -> ExitCode {
    Cli::new()
        .client(
            "watchdog-lock",
            Time::Simulated,
            "a watchdog lease library over the recorded lock service",
            |cx| custom_client::WatchdogLock::new(cx, false),
        )
        .client(
            "watchdog-lock-cached",
            Time::Simulated,
            "the same library, its ownership check answered from a cached flag",
            |cx| custom_client::WatchdogLock::new(cx, true),
        )
        .main()
}
