//! `fencer serve`: the local web viewer over the run archive.

use std::io::Write;
use std::path::Path;

use fencer_results::serve::Server;

use super::output::outln;
use super::{Failure, Outcome};

/// Loopback only by default: the archive can hold anything a run recorded.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8484";

/// Serves `archive` on `listen` until interrupted.
pub fn serve(archive: &Path, listen: &str) -> Outcome {
    let server = Server::bind(archive, listen).map_err(Failure::bad_input)?;
    outln!(
        "fencer serve: {} (archive {})",
        server.url(),
        archive.display()
    );
    let _ = std::io::stdout().flush();
    server.run();
    Ok(0)
}
