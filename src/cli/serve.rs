//! `fencer serve`: the local web viewer over a run store.

use std::io::Write;
use std::path::Path;

use fencer_results::serve::Server;

use super::{Failure, Outcome};

/// Loopback only by default: the store can hold anything a run recorded.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8484";

/// Serves `store_dir` on `listen` until interrupted.
pub fn serve(store_dir: &Path, listen: &str) -> Outcome {
    let server = Server::bind(store_dir, listen).map_err(Failure::BadInput)?;
    println!(
        "fencer serve: {} (store {})",
        server.url(),
        store_dir.display()
    );
    let _ = std::io::stdout().flush();
    server.run();
    Ok(0)
}
