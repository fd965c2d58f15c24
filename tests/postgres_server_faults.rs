//! Faults on a private PostgreSQL that fencer starts itself (initdb in a temp dir, run as the
//! `postgres` user, killed on drop even when a test panics).

#![cfg(feature = "postgres")]

mod support;

use fencer::servers::ServerGuard;
use support::backends_required;

/// A private PostgreSQL, or `None` (after the skip line) when it cannot be started.
fn private_postgres(test: &str, faketime: bool) -> Option<ServerGuard> {
    match ServerGuard::postgres(faketime) {
        Ok(server) => Some(server),
        Err(error) => {
            let probe = async move { Err(error) };
            assert!(!support::reachable(test, "a private PostgreSQL", "postgresql", probe));
            assert!(!backends_required());
            None
        }
    }
}

#[test]
fn starts() {
    let t = std::time::Instant::now();
    let s = private_postgres("x", true).unwrap();
    println!("{} {:?}", s.postgres_url(), t.elapsed());
}
