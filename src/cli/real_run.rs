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
use fencer_run::fit::{Reach, check_takes};
use fencer_run::real::{real_plan, unique_tag};
use fencer_servers::PRIVATE_SCHEME;
use fencer_servers::PrivateServer;

use super::{Failure, Outcome, describe, print_left_out, report};

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
                let server = PrivateServer::start(url).map_err(Failure::BadInput)?;
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
    // What to run, before any server starts: a saved plan, or the settings to expand.
    let saved = match plan_path {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|error| {
                Failure::BadInput(format!("{}: cannot read the plan: {error}", path.display()))
            })?;
            let mut plan = Plan::from_json(&bytes, &path.display().to_string())
                .map_err(|error| Failure::BadInput(error.to_string()))?;
            // The servers are the ones named now: they decide which server faults can run.
            plan.settings.lock_url = Some(redact_url(targets.lock_url));
            plan.settings.store_url = Some(redact_url(targets.store_url));
            Some((path, plan))
        }
        None => None,
    };
    let settings = Settings {
        lock_url: Some(redact_url(targets.lock_url)),
        store_url: Some(redact_url(targets.store_url)),
        ..settings.clone()
    };
    if saved.is_none() {
        for warning in settings.validate().map_err(Failure::BadInput)? {
            eprintln!("warning: {warning}");
        }
    }
    let (started, [lock_url, store_url]) =
        Started::start([("lock", targets.lock_url), ("store", targets.store_url)])?;
    let lock = lock_from_url(&lock_url).map_err(Failure::BadInput)?;
    let store = store_from_url(&store_url).map_err(Failure::BadInput)?;
    // The adapters decide what the run can take beyond the servers: a restart hook.
    let reach = Reach::of(lock.adapter.as_ref());
    let plan = match saved {
        Some((path, plan)) => {
            check_takes(&plan, reach)
                .map_err(|why| Failure::BadInput(format!("{}: {why}", path.display())))?;
            plan
        }
        None => real_plan(&settings, reach),
    };
    print_left_out(&plan);
    println!("fencer run (real time): {}", describe(&plan.settings));
    let runtime = real_runtime()
        .map_err(|error| Failure::Internal(format!("cannot start a tokio runtime: {error}")))?;
    runtime
        .block_on(async {
            lock.ping().await?;
            store.ping().await
        })
        .map_err(Failure::BadInput)?;
    let started_at = std::time::Instant::now();
    let names = RunNames::tagged(&unique_tag(plan.settings.seed));
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
                    started.targets(),
                ) => history,
            }
        })
        .map_err(|error| match error {
            RunError::Plan(message) => Failure::BadInput(message),
            RunError::Internal(message) => Failure::Internal(message),
        })?;
    drop(runtime);
    drop(started);
    let verdict = judge(&plan.settings, &history, false);
    report::print_summary(
        &report::Shape::of_history(&history),
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
    save_run(&finished, &dir, out.is_none().then_some(archive))
        .map_err(|error| Failure::BadInput(format!("cannot save the run: {error}")))?;
    println!("run directory: {}", dir.display());
    println!(
        "run the same plan again: fencer run --plan {} --lock {} --store {}",
        dir.join("plan.json").display(),
        redact_url(targets.lock_url),
        redact_url(targets.store_url)
    );
    Ok(verdict.validity.exit_code())
}
