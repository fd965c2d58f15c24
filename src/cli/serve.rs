//! `fencer serve`: the local web viewer over the run archive.

use std::io::Write;
use std::path::Path;

use fencer_results::serve::{Exposure, Server};

use super::output::{errln, outln};
use super::{Failure, Outcome};

/// Loopback only by default: the archive can hold anything a run recorded.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8484";

/// Serves `archive` on `listen` until interrupted; an address that is not loopback is refused
/// unless `allow_remote`, and then served with a warning.
pub fn serve(archive: &Path, listen: &str, allow_remote: bool) -> Outcome {
    let exposure = if allow_remote {
        Exposure::Network
    } else {
        Exposure::Loopback
    };
    let server = Server::bind(archive, listen, exposure).map_err(Failure::bad_input)?;
    if !server.is_loopback() {
        errln!(
            "warning: serving the run archive to the network on {}: anyone who can reach this \
             address can read every run in {} (its histories, plans and settings)",
            server.url(),
            archive.display()
        );
    }
    outln!(
        "fencer serve: {} (archive {})",
        server.url(),
        archive.display()
    );
    let _ = std::io::stdout().flush();
    server.run();
    Ok(0)
}
