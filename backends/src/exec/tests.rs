//! The exec adapter end to end against real children: the shipped Python example
//! (`examples/exec/lease_service.py`), and small `sh`/`python3` children that break the
//! protocol in one way each.

use std::sync::Arc;
use std::time::Duration;

use fencer_harness::runtime::real_runtime;
use fencer_harness::{
    Acquired, CallError, ExpiryRule, FencedStore, LockChange, LockService, Owned, OwnerToken,
    ReadValue, Written,
};
use fencer_nemesis::{ServerAction, ServerFaults};

use super::child::ExecChild;
use super::{CommandError, ExecCommand, ExecConnection, ExecError, ExecLock, ExecStore, Role};

const TTL: Duration = Duration::from_millis(300);
const A: OwnerToken = OwnerToken(0xa);
const B: OwnerToken = OwnerToken(0xb);
/// Long enough for a cold `python3` on a loaded machine.
const HELLO: Duration = Duration::from_secs(20);
/// How long a reply that must not come is waited for.
const SILENCE: Duration = Duration::from_millis(300);

/// The example service's command line.
fn example() -> String {
    format!(
        "python3 {}/../examples/exec/lease_service.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A child that runs `script` with `python3 -c`, after it answered hello with `hello`. Both
/// must quote with `"` only: the program is one `'…'` word of the command line.
fn python(hello: &str, script: &str) -> String {
    let program = format!(
        "import json, sys\n\
         request = json.loads(sys.stdin.readline())\n\
         print(json.dumps({{\"id\": request[\"id\"], \"result\": \"hello\", {hello}}}), flush=True)\n\
         {script}"
    );
    format!("python3 -c '{program}'")
}

fn start(command: &str, hello_timeout: Duration) -> Result<ExecChild, ExecError> {
    let command = ExecCommand::parse(command).unwrap();
    real_runtime()
        .unwrap()
        .block_on(ExecChild::start(&command, &[], None, hello_timeout))
}

/// Whether process `pid` is gone (or a zombie nobody will run again).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// The pid in a message naming a child (`… (pid 123) …`).
fn pid_in(message: &str) -> u32 {
    let after = message.split("(pid ").nth(1).expect("a pid in the message");
    after[..after.find(')').unwrap()].parse().unwrap()
}

/// Whether `python3` runs; if not, a `FENCER-SKIPPED-BACKEND` line (as the real-server tests
/// print) and false, or a failure under `FENCER_REQUIRE_BACKENDS=1`.
fn python_runs(test: &str) -> bool {
    let runs = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !runs {
        assert_ne!(
            std::env::var("FENCER_REQUIRE_BACKENDS").as_deref(),
            Ok("1"),
            "{test}: python3 does not run and FENCER_REQUIRE_BACKENDS=1"
        );
        eprintln!("FENCER-SKIPPED-BACKEND {test}: python3 does not run; install python3");
    }
    runs
}

#[test]
fn a_command_that_does_not_exist_is_one_line() {
    let error = start("no-such-program-for-fencer --flag", HELLO).unwrap_err();
    assert!(matches!(error, ExecError::Spawn { .. }), "{error}");
    let error = error.to_string();
    assert!(
        error.starts_with("cannot start exec:no-such-program-for-fencer --flag: "),
        "{error}"
    );
    assert!(!error.contains('\n'), "{error}");
}

#[test]
fn a_child_that_exits_before_its_hello_says_how() {
    let error = start("sh -c 'echo starting >&2; exit 3'", HELLO).unwrap_err();
    assert!(
        matches!(error, ExecError::EndedBeforeHello { .. }),
        "{error}"
    );
    let error = error.to_string();
    assert!(
        error.contains("exited (exit status: 3) before answering hello"),
        "{error}"
    );
    assert!(
        error.starts_with("exec child `sh -c echo starting >&2; exit 3` (pid "),
        "{error}"
    );
    assert!(
        error.ends_with("before answering hello; its last line on stderr: starting"),
        "{error}"
    );
    let silent = start("sh -c 'echo >&2; exit 4'", HELLO)
        .unwrap_err()
        .to_string();
    assert!(
        silent.ends_with("exited (exit status: 4) before answering hello"),
        "{silent}"
    );
}

#[test]
fn a_silent_child_times_out_and_is_killed() {
    let error = start("sleep 60", Duration::from_millis(300)).unwrap_err();
    assert!(matches!(error, ExecError::HelloTimeout { .. }), "{error}");
    let error = error.to_string();
    assert!(
        error.contains("did not answer hello within 300ms"),
        "{error}"
    );
    let pid = pid_in(&error);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !gone(pid) {
        assert!(std::time::Instant::now() < deadline, "pid {pid} still runs");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_hello_that_is_not_one_names_the_line() {
    let error = start("sh -c 'echo ready; sleep 60'", HELLO)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("broke the protocol: stdout line 1 (`ready`): not a JSON object"),
        "{error}"
    );
    assert!(error.ends_with("before answering hello"), "{error}");
    if !python_runs("a_hello_that_is_not_one_names_the_line") {
        return;
    }
    let error = start(&python("\"protocol\": 3, \"roles\": [\"lock\"]", ""), HELLO).unwrap_err();
    assert!(
        matches!(error, ExecError::OtherProtocol { protocol: 3, .. }),
        "{error}"
    );
    let error = error.to_string();
    assert!(
        error.contains("speaks exec protocol 3; this fencer speaks 1 and 2"),
        "{error}"
    );
    let error = start(&python("\"protocol\": 1, \"roles\": []", ""), HELLO).unwrap_err();
    assert!(matches!(error, ExecError::NoRoles { .. }), "{error}");
    assert!(error.to_string().contains("names no roles"), "{error}");
}

#[test]
fn the_example_keeps_the_lock_and_store_contract() {
    if !python_runs("the_example_keeps_the_lock_and_store_contract") {
        return;
    }
    let connection = Arc::new(ExecConnection::open(&example()).unwrap());
    let lock = ExecLock::new(Arc::clone(&connection));
    let store = ExecStore::new(Arc::clone(&connection));
    real_runtime().unwrap().block_on(async {
        connection.ping(Role::Lock).await.unwrap();
        connection.ping(Role::Store).await.unwrap();
        let Ok(Acquired::Granted {
            fencing_token: first,
        }) = lock.acquire("L", A, TTL).await
        else {
            panic!("a free lock is granted")
        };
        assert_eq!(lock.acquire("L", B, TTL).await, Ok(Acquired::Busy));
        assert_eq!(lock.renew("L", B, TTL).await, Ok(Owned::NotOwner));
        assert_eq!(lock.release("L", B).await, Ok(Owned::NotOwner));
        assert_eq!(lock.renew("L", A, TTL).await, Ok(Owned::Done));
        assert_eq!(lock.release("L", A).await, Ok(Owned::Done));
        let Ok(Acquired::Granted {
            fencing_token: second,
        }) = lock.acquire("L", B, TTL).await
        else {
            panic!("a released lock is granted")
        };
        assert!(second > first);
        assert_eq!(store.read("k").await, Ok(ReadValue::default()));
        assert_eq!(
            store.write("k", second, "w2", "v2").await,
            Ok(Written::Applied)
        );
        assert_eq!(
            store.write("k", first, "w1", "v1").await,
            Ok(Written::Rejected {
                current_token: second
            })
        );
        assert_eq!(
            store.write("k", second, "w3", "v3").await,
            Ok(Written::Applied)
        );
        assert_eq!(
            store.read("k").await,
            Ok(ReadValue {
                fencing_token: second,
                write_id: Some("w3".into()),
                value: Some("v3".into())
            })
        );
        let log = store
            .applied_log()
            .await
            .expect("the example offers its log");
        let ids: Vec<(u64, &str)> = log.iter().map(|w| (w.seq, w.write_id.as_str())).collect();
        assert_eq!(ids, [(1, "w2"), (2, "w3")]);
    });
}

#[test]
fn the_example_hands_over_its_lock_log_in_service_order_as_replied() {
    if !python_runs("the_example_hands_over_its_lock_log_in_service_order_as_replied") {
        return;
    }
    let connection = Arc::new(ExecConnection::open(&example()).unwrap());
    let lock = ExecLock::new(connection);
    real_runtime().unwrap().block_on(async {
        let short = Duration::from_millis(20);
        assert_eq!(
            lock.acquire("L", A, short).await,
            Ok(Acquired::Granted { fencing_token: 1 })
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The service notices A's expiry here and logs an `expire`, which fencer leaves out.
        assert_eq!(
            lock.acquire("L", B, TTL).await,
            Ok(Acquired::Granted { fencing_token: 2 })
        );
        assert_eq!(lock.renew("L", A, TTL).await, Ok(Owned::NotOwner));
        assert_eq!(lock.renew("L", B, TTL).await, Ok(Owned::Done));
        assert_eq!(lock.release("L", B).await, Ok(Owned::Done));
        let log = lock
            .lock_log()
            .await
            .expect("the example offers its lock log");
        let seqs: Vec<u64> = log.iter().map(|entry| entry.seq).collect();
        assert_eq!(seqs, [1, 3, 4, 5], "the expire (seq 2) is left out");
        assert!(log.iter().all(|entry| entry.lock == "L"));
        assert!(
            log.windows(2).all(|pair| pair[0].at_ns <= pair[1].at_ns),
            "one monotonic service clock: {log:?}"
        );
        let changes: Vec<&LockChange> = log.iter().map(|entry| &entry.change).collect();
        assert_eq!(
            changes[..2],
            [
                &LockChange::Granted {
                    owner: A,
                    fencing_token: 1,
                    ttl: short,
                    expires_ns: log[0].at_ns + 20_000_000,
                },
                &LockChange::Granted {
                    owner: B,
                    fencing_token: 2,
                    ttl: TTL,
                    expires_ns: log[1].at_ns + 300_000_000,
                },
            ]
        );
        assert_eq!(
            changes[2..],
            [
                &LockChange::Renewed {
                    owner: B,
                    holder: B,
                    holder_token: 2,
                    ttl: TTL,
                    expires_ns: log[2].at_ns + 300_000_000,
                },
                &LockChange::Released {
                    owner: B,
                    holder: B,
                    holder_token: 2,
                },
            ]
        );
    });
}

#[test]
fn a_child_s_hello_states_the_boundary_rule_its_lock_log_is_read_by() {
    if !python_runs("a_child_s_hello_states_the_boundary_rule_its_lock_log_is_read_by") {
        return;
    }
    let live_at_expiry = python(
        "\"protocol\": 1, \"roles\": [\"lock\"], \"offers\": [\"lock-log\"], \
         \"lock_log_expiry\": {\"live_at_expiry\": True, \"resolution_ns\": 1000000}",
        "request = json.loads(sys.stdin.readline())\n\
         print(json.dumps({\"id\": request[\"id\"], \"result\": \"lock-log\", \
         \"entries\": []}), flush=True)\n\
         sys.stdin.read()",
    );
    real_runtime().unwrap().block_on(async {
        let lock = ExecLock::new(Arc::new(ExecConnection::open(&live_at_expiry).unwrap()));
        assert_eq!(lock.lock_log().await, Some(vec![]));
        assert_eq!(
            lock.lock_log_expiry(),
            ExpiryRule {
                live_at_expiry: true,
                resolution_ns: 1_000_000
            }
        );
    });
}

#[test]
fn a_lock_log_fencer_cannot_read_is_not_used_and_one_not_offered_is_not_asked_for() {
    if !python_runs("a_lock_log_fencer_cannot_read_is_not_used") {
        return;
    }
    let bad_owner = python(
        "\"protocol\": 1, \"roles\": [\"lock\"], \"offers\": [\"lock-log\"]",
        "request = json.loads(sys.stdin.readline())\n\
         entry = {\"seq\": 1, \"op\": \"release\", \"lock\": \"L\", \"owner\": \"w0\", \
         \"holder\": \"w0\", \"holder_token\": 1, \"at_ns\": 5}\n\
         print(json.dumps({\"id\": request[\"id\"], \"result\": \"lock-log\", \
         \"entries\": [entry]}), flush=True)\n\
         sys.stdin.read()",
    );
    let not_offered = python("\"protocol\": 1, \"roles\": [\"lock\"]", "sys.stdin.read()");
    real_runtime().unwrap().block_on(async {
        let connection = Arc::new(ExecConnection::open(&bad_owner).unwrap());
        let lock = ExecLock::new(Arc::clone(&connection));
        assert_eq!(
            lock.lock_log().await,
            None,
            "an owner that is not 32 hex digits"
        );
        let child = connection.current().await.unwrap();
        let killed = tokio::time::timeout(Duration::from_secs(10), async {
            while child.ended().is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        killed
            .await
            .expect("a child that broke the protocol is killed");
        assert!(
            child.ended().unwrap().contains("owner token"),
            "{:?}",
            child.ended()
        );

        // Until a hello says otherwise, the log is read by fencer's own rule.
        assert_eq!(lock.lock_log_expiry(), ExpiryRule::ENDS_AT_EXPIRY);

        let connection = Arc::new(ExecConnection::open(&not_offered).unwrap());
        let lock = ExecLock::new(Arc::clone(&connection));
        connection.ping(Role::Lock).await.unwrap();
        assert_eq!(lock.lock_log().await, None, "not offered");
        let child = connection.current().await.unwrap();
        assert_eq!(child.ended(), None, "and not asked for");
    });
}

#[test]
fn a_lease_expires_on_the_service_clock() {
    if !python_runs("a_lease_expires_on_the_service_clock") {
        return;
    }
    let connection = Arc::new(ExecConnection::open(&example()).unwrap());
    let lock = ExecLock::new(connection);
    real_runtime().unwrap().block_on(async {
        let short = Duration::from_millis(50);
        assert!(matches!(
            lock.acquire("L", A, short).await,
            Ok(Acquired::Granted { .. })
        ));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            lock.renew("L", A, TTL).await,
            Ok(Owned::NotOwner),
            "no revival"
        );
        assert!(matches!(
            lock.acquire("L", B, TTL).await,
            Ok(Acquired::Granted { .. })
        ));
    });
}

#[test]
fn a_child_serving_one_role_refuses_the_other_before_sending() {
    if !python_runs("a_child_serving_one_role_refuses_the_other_before_sending") {
        return;
    }
    let connection = Arc::new(
        ExecConnection::open(&python(
            "\"protocol\": 1, \"roles\": [\"store\"]",
            "sys.stdin.read()",
        ))
        .unwrap(),
    );
    real_runtime().unwrap().block_on(async {
        connection.ping(Role::Store).await.unwrap();
        let error = connection.ping(Role::Lock).await.unwrap_err();
        assert!(
            matches!(
                error,
                ExecError::NotServing {
                    role: Role::Lock,
                    ..
                }
            ),
            "{error}"
        );
        let error = error.to_string();
        assert!(
            error.contains("does not serve the lock role (its hello names store)"),
            "{error}"
        );
        let lock = ExecLock::new(Arc::clone(&connection));
        let Err(CallError::NotApplied(why)) = lock.acquire("L", A, TTL).await else {
            panic!("never sent")
        };
        assert!(why.contains("does not serve the lock role"), "{why}");
        let store = ExecStore::new(connection);
        assert_eq!(store.applied_log().await, None, "not offered");
    });
}

#[test]
fn a_reply_that_does_not_answer_its_request_kills_the_child() {
    if !python_runs("a_reply_that_does_not_answer_its_request_kills_the_child") {
        return;
    }
    let answers_done = python(
        "\"protocol\": 1, \"roles\": [\"lock\", \"store\"]",
        "for line in sys.stdin:\n    \
         print(json.dumps({\"id\": json.loads(line)[\"id\"], \"result\": \"done\"}), flush=True)",
    );
    let connection = Arc::new(ExecConnection::open(&answers_done).unwrap());
    let lock = ExecLock::new(Arc::clone(&connection));
    let store = ExecStore::new(Arc::clone(&connection));
    real_runtime().unwrap().block_on(async {
        assert_eq!(lock.release("L", A).await, Ok(Owned::Done));
        let Err(CallError::Unknown(why)) = lock.acquire("L", A, TTL).await else {
            panic!("a protocol error leaves the outcome unknown")
        };
        assert!(
            why.contains(
                "broke the protocol: stdout line 3: `done` does not answer acquire \
                          (expected granted or busy)"
            ),
            "{why}"
        );
        let child = connection.current().await.unwrap();
        let reaped = tokio::time::timeout(Duration::from_secs(10), async {
            while child.ended().is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        reaped.await.expect("the child is killed");
        let Err(CallError::NotApplied(later)) = store.read("k").await else {
            panic!("nothing reaches a killed child")
        };
        assert!(later.contains("broke the protocol"), "{later}");
    });
}

#[test]
fn a_paused_child_answers_after_it_resumes_and_a_restart_loses_its_memory() {
    if !python_runs("a_paused_child_answers_after_it_resumes_and_a_restart_loses_its_memory") {
        return;
    }
    let connection = Arc::new(ExecConnection::open(&example()).unwrap());
    let lock = Arc::new(ExecLock::new(Arc::clone(&connection)));
    real_runtime().unwrap().block_on(async {
        assert!(matches!(
            lock.acquire("L", A, Duration::from_secs(60)).await,
            Ok(Acquired::Granted { fencing_token: 1 })
        ));
        connection.apply(ServerAction::Pause).await.unwrap();
        let frozen = tokio::spawn({
            let lock = Arc::clone(&lock);
            async move { lock.acquire("L", B, TTL).await }
        });
        // The same child paused for its other role too: one resume does not thaw it.
        connection.apply(ServerAction::Pause).await.unwrap();
        tokio::time::sleep(SILENCE).await;
        assert!(!frozen.is_finished(), "a stopped child answers nothing");
        connection.apply(ServerAction::Resume).await.unwrap();
        tokio::time::sleep(SILENCE).await;
        assert!(!frozen.is_finished(), "still paused for the other role");
        connection.apply(ServerAction::Resume).await.unwrap();
        assert_eq!(frozen.await.unwrap(), Ok(Acquired::Busy));

        connection.apply(ServerAction::Pause).await.unwrap();
        let in_flight = tokio::spawn({
            let lock = Arc::clone(&lock);
            async move { lock.renew("L", A, TTL).await }
        });
        tokio::time::sleep(SILENCE).await;
        connection.apply(ServerAction::Kill).await.unwrap();
        let Err(CallError::Unknown(why)) = in_flight.await.unwrap() else {
            panic!("a call sent to a killed child may have been applied")
        };
        assert!(why.contains("killed by a restart fault"), "{why}");
        let Err(CallError::NotApplied(_)) = lock.release("L", A).await else {
            panic!("nothing reaches a child that is down")
        };
        // Overlapping faults: a pause or resume while it is down has nothing to do.
        connection.apply(ServerAction::Resume).await.unwrap();
        connection.apply(ServerAction::Start).await.unwrap();
        assert!(
            matches!(
                lock.acquire("L", B, TTL).await,
                Ok(Acquired::Granted { fencing_token: 1 })
            ),
            "without a journal the restarted child forgot the lease and its token counter"
        );
        let refused = connection.apply(ServerAction::Cut).await.unwrap_err();
        assert!(
            refused.0.contains("takes only pauses and restarts"),
            "{refused}"
        );
    });
}

#[test]
fn a_journal_keeps_tokens_across_a_restart() {
    if !python_runs("a_journal_keeps_tokens_across_a_restart") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("fencer-exec-journal-{}", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    let command = format!("{} --journal {}", example(), dir.display());
    let connection = Arc::new(ExecConnection::open(&command).unwrap());
    let lock = ExecLock::new(Arc::clone(&connection));
    real_runtime().unwrap().block_on(async {
        assert!(matches!(
            lock.acquire("L", A, Duration::from_secs(60)).await,
            Ok(Acquired::Granted { fencing_token: 1 })
        ));
        connection.apply(ServerAction::Kill).await.unwrap();
        connection.apply(ServerAction::Start).await.unwrap();
        assert_eq!(
            lock.acquire("L", B, TTL).await,
            Ok(Acquired::Busy),
            "the lease survived"
        );
        assert_eq!(lock.release("L", A).await, Ok(Owned::Done));
        assert!(matches!(
            lock.acquire("L", B, TTL).await,
            Ok(Acquired::Granted { fencing_token: 2 })
        ));
    });
    let _ = std::fs::remove_file(&dir);
}

#[test]
fn a_child_that_dies_settles_its_calls_and_is_not_started_again() {
    if !python_runs("a_child_that_dies_settles_its_calls_and_is_not_started_again") {
        return;
    }
    let exits_on_read = python(
        "\"protocol\": 1, \"roles\": [\"store\"]",
        "sys.stdin.readline()\nsys.exit(4)",
    );
    let connection = Arc::new(ExecConnection::open(&exits_on_read).unwrap());
    let store = ExecStore::new(Arc::clone(&connection));
    real_runtime().unwrap().block_on(async {
        let Err(CallError::Unknown(why)) = store.read("k").await else {
            panic!("the child read the request before it died")
        };
        assert!(why.contains("exited (exit status: 4)"), "{why}");
        let Err(CallError::NotApplied(why)) = store.write("k", 1, "w", "v").await else {
            panic!("a dead child reads nothing")
        };
        assert!(why.contains("exited (exit status: 4)"), "{why}");
        let error = connection.ping(Role::Store).await.unwrap_err();
        assert!(matches!(error, ExecError::Ended { .. }), "{error}");
        assert!(error.to_string().contains("exited"), "{error}");
    });
}

#[test]
fn one_command_shares_one_connection() {
    let first = ExecConnection::shared("python3  x.py").unwrap();
    let same = ExecConnection::shared("python3 x.py").unwrap();
    let other = ExecConnection::shared("python3 y.py").unwrap();
    assert!(Arc::ptr_eq(&first, &same));
    assert!(!Arc::ptr_eq(&first, &other));
    let error = ExecConnection::shared("  ").unwrap_err();
    assert_eq!(error, CommandError::Empty);
}
