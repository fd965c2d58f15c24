//! `fencer run --lock URL --store URL`: the real tier from the command line.
//!
//! A `private:` URL (`private:redis`, `private:postgres`, `private:etcd`, `private:zookeeper`)
//! asks fencer to start that server itself (free loopback port, temp dir, fencer's fault proxy
//! in front); those servers can then take the plan's server faults, and are stopped when the
//! run ends, on error too. The servers are
//! checked first (a clear error and exit 254 if one is unreachable or refuses the login), then
//! the plan runs in real time, is checked and saved like a simulated run. The saved settings
//! carry the URLs with their passwords hidden; `--plan` re-runs a saved plan.

use std::path::Path;
use std::sync::Arc;

use crate::{Plan, RunError, Settings};
use fencer_backends::redact_url;
use fencer_backends::registry::{lock_from_url, store_from_url};
use fencer_harness::runtime::real_runtime;
use fencer_results::save::{FinishedRun, default_run_dir, save_run};
use fencer_run::checking::judge;
use fencer_run::drive::{RunNames, ServerTargets, drive_with_servers};
use fencer_run::real::{check_servers_take_faults, real_plan, unique_tag};
use fencer_servers::PRIVATE_SCHEME;
use fencer_servers::PrivateServer;

use super::{Failure, Outcome, describe, summary};

/// Where the lock service and store live.
pub struct RealTargets<'a> {
    /// The lock server's URL (may carry a password), or a `private:` one (`private:redis`,
    /// `private:postgres`, `private:etcd`, `private:zookeeper`).
    pub lock_url: &'a str,
    /// The store server's URL (may carry a password), or `private:…`.
    pub store_url: &'a str,
}

/// The servers fencer started for a run; dropping it stops them (also on an early return).
struct Started {
    servers: Vec<(&'static str, Arc<PrivateServer>)>,
}

impl Started {
    /// Starts the server of every `private:` URL among `urls` (role, URL) and returns the URL
    /// each role's adapter uses.
    fn start(urls: [(&'static str, &str); 2]) -> Result<(Started, [String; 2]), Failure> {
        let mut started = Started {
            servers: Vec::new(),
        };
        let mut client_urls = [String::new(), String::new()];
        for (slot, (role, url)) in urls.into_iter().enumerate() {
            client_urls[slot] = if url.starts_with(PRIVATE_SCHEME) {
                let server = PrivateServer::start(url).map_err(Failure::bad_input)?;
                println!("started the {role} server: {}", server.describe());
                let client_url = server.url();
                started.servers.push((role, Arc::new(server)));
                client_url
            } else {
                url.to_string()
            };
        }
        Ok((started, client_urls))
    }

    fn targets(&self) -> ServerTargets {
        self.servers
            .iter()
            .map(|(role, server)| {
                let server: Arc<dyn fencer_nemesis::ServerFaults> = server.clone();
                (role.to_string(), server)
            })
            .collect()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        for (role, server) in self.servers.drain(..) {
            let port = server.server_port();
            drop(server);
            println!("stopped the {role} server (port {port})");
        }
    }
}

/// Runs `settings` (or the saved plan at `plan_path`) against real servers.
pub fn run(
    settings: &Settings,
    targets: &RealTargets<'_>,
    plan_path: Option<&Path>,
    out: Option<&Path>,
    archive: &Path,
) -> Outcome {
    let plan = match plan_path {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|error| {
                Failure::BadInput(format!("{}: cannot read the plan: {error}", path.display()))
            })?;
            let mut plan = Plan::from_json(&bytes, &path.display().to_string())
                .map_err(|error| Failure::BadInput(error.to_string()))?;
            // The servers are the ones named now: they decide which server faults can run.
            plan.settings.lock_url = Some(redact_url(targets.lock_url));
            plan.settings.store_url = Some(redact_url(targets.store_url));
            check_servers_take_faults(&plan)
                .map_err(|why| Failure::BadInput(format!("{}: {why}", path.display())))?;
            plan
        }
        None => {
            let settings = Settings {
                lock_url: Some(redact_url(targets.lock_url)),
                store_url: Some(redact_url(targets.store_url)),
                ..settings.clone()
            };
            for warning in settings.validate().map_err(Failure::bad_input)? {
                eprintln!("warning: {warning}");
            }
            let plan = real_plan(&settings);
            let left_out = Plan::generate(&settings).faults.len() - plan.faults.len();
            if left_out > 0 {
                println!(
                    "note: {left_out} faults aimed at servers left out (a server behind a plain \
                     URL is not fencer's to pause, restart or skew, a private etcd or \
                     ZooKeeper takes no clock jumps, and an exec child only pauses and restarts)"
                );
            }
            plan
        }
    };
    let (started, [lock_url, store_url]) =
        Started::start([("lock", targets.lock_url), ("store", targets.store_url)])?;
    let lock = lock_from_url(&lock_url).map_err(Failure::bad_input)?;
    let store = store_from_url(&store_url).map_err(Failure::bad_input)?;
    println!("fencer run (real time): {}", describe(&plan.settings));
    let runtime = real_runtime()
        .map_err(|error| Failure::Internal(format!("cannot start a tokio runtime: {error}")))?;
    runtime
        .block_on(async {
            lock.ping().await?;
            store.ping().await
        })
        .map_err(Failure::bad_input)?;
    let started_at = std::time::Instant::now();
    let names = RunNames::tagged(&unique_tag(plan.settings.seed));
    // The servers fencer started, and the exec children it runs, take the plan's server faults.
    let mut server_targets = started.targets();
    server_targets.extend(lock.server().map(|server| ("lock".to_string(), server)));
    server_targets.extend(store.server().map(|server| ("store".to_string(), server)));
    let history = runtime
        .block_on(async {
            tokio::select! {
                biased;
                _ = tokio::signal::ctrl_c() => Err(RunError::Internal(
                    "interrupted (Ctrl-C): the servers fencer started are stopped".into(),
                )),
                history = drive_with_servers(
                    Arc::new(plan.clone()),
                    lock.adapter,
                    store.adapter,
                    names,
                    server_targets,
                ) => history,
            }
        })
        .map_err(Failure::from)?;
    drop(runtime);
    drop(started);
    let verdict = judge(&plan.settings, &history, false);
    summary::print_summary(
        &summary::Shape::of_history(&history),
        &verdict,
        started_at.elapsed().as_secs_f64(),
    );
    let dir = match out {
        Some(dir) => dir.to_path_buf(),
        None => default_run_dir(
            archive,
            plan.settings.workload.name(),
            &format!("real-{}", plan.settings.seed),
        ),
    };
    let finished = FinishedRun {
        command: "run",
        plan: &plan,
        history: &history,
        verdict: &verdict,
    };
    save_run(&finished, &dir, out.is_none().then_some(archive)).map_err(Failure::from)?;
    println!("run directory: {}", dir.display());
    println!(
        "run the same plan again: fencer run --plan {} --lock {} --store {}",
        dir.join("plan.json").display(),
        shell_word(&redact_url(targets.lock_url)),
        shell_word(&redact_url(targets.store_url))
    );
    Ok(verdict.validity.exit_code())
}

/// `text` as one shell word: quoted when it holds spaces or quotes (an `exec:` command line).
fn shell_word(text: &str) -> String {
    if text.contains([' ', '\t', '\'', '"', '\\']) {
        format!("'{}'", text.replace('\'', r"'\''"))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn commands_with_spaces_are_quoted_for_the_shell() {
        assert_eq!(shell_word("redis://h:1/0"), "redis://h:1/0");
        assert_eq!(shell_word("exec:python3 x.py"), "'exec:python3 x.py'");
        assert_eq!(shell_word("exec:sh -c 'a'"), r"'exec:sh -c '\''a'\'''");
    }
}
