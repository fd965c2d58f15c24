//! The command line as a user meets it: exit codes, one-line errors for bad input, atomic run
//! directories, replay, demo.

mod cli_support;
use cli_support::fencer;

use std::process::Output;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Asserts a bad-input exit: code 254, no panic, a message containing `needle`, nothing written.
fn assert_bad_input(args: &[&str], needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let output = fencer(args, dir.path());
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(254), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected `{needle}` in: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "{args:?} left files behind"
    );
}

#[test]
fn bad_flag_values_exit_254_with_a_reason() {
    assert_bad_input(
        &["run", "--store", "mysql"],
        "unknown store `mysql`: expected one of sqlite",
    );
    assert_bad_input(&["run", "--lock", "zk"], "unknown lock `zk`");
    assert_bad_input(&["run", "--nemesis", "pause,gc"], "unknown nemesis `gc`");
    assert_bad_input(
        &["run", "--on-renew-failure", "retry"],
        "expected stop or continue",
    );
    assert_bad_input(
        &["run", "--wait", "queue"],
        "unknown wait mode `queue`: expected auto, poll or backoff",
    );
    assert_bad_input(&["run", "--ttl", "0s"], "a duration must be positive");
    assert_bad_input(&["run", "--ttl", "-5s"], "a duration must be positive");
    assert_bad_input(&["run", "--ttl", "ten"], "unknown unit `ten`");
    assert_bad_input(&["run", "--ttl", "10"], "has no unit");
    assert_bad_input(&["run", "--workers", "0"], "workers must be 1 to 1000");
    assert_bad_input(&["run", "--frobnicate"], "unexpected argument");
    assert_bad_input(
        &["run", "--ttl", "10s", "--renew-every", "10s"],
        "must be shorter than ttl",
    );
}

/// A directory no one may create anything in: a read-only one, or, for a user whose
/// permissions are not checked (root), sysfs, which refuses every new entry.
#[cfg(unix)]
fn read_only_dir(root: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join("read-only");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    if std::fs::create_dir(dir.join("probe")).is_ok() {
        return std::path::PathBuf::from("/sys");
    }
    dir
}

#[cfg(unix)]
#[test]
fn an_unusable_place_for_the_results_exits_254_at_once_without_running() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a-file"), b"x").unwrap();
    let read_only = read_only_dir(dir.path());
    let read_only_run = read_only.join("run").display().to_string();
    let read_only_name = read_only.display().to_string();
    // A million cycles: a run that started would take far longer than the second allowed.
    let big = ["--workers", "100", "--ops", "10000"];
    for (command, flag, place, named) in [
        ("run", "--out", "a-file", "a-file"),
        ("run", "--out", "a-file/run", "a-file"),
        (
            "run",
            "--out",
            read_only_run.as_str(),
            read_only_name.as_str(),
        ),
        ("run", "--archive", "a-file/runs", "a-file"),
        ("demo", "--archive", "a-file/runs", "a-file"),
        ("gate", "--out", "a-file/gate", "a-file"),
        (
            "gate",
            "--out",
            read_only_run.as_str(),
            read_only_name.as_str(),
        ),
        ("gate", "--junit", "a-file/junit.xml", "a-file"),
    ] {
        let mut args = vec![command, flag, place];
        if command != "demo" {
            args.extend(big);
        }
        if command == "gate" && flag == "--junit" {
            args.extend(["--out", "gate"]);
        }
        let started = std::time::Instant::now();
        let output = fencer(&args, dir.path());
        let took = started.elapsed();
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(254), "{args:?}: {err}");
        assert!(
            took < std::time::Duration::from_secs(1),
            "{args:?} took {took:?}"
        );
        assert!(
            err.contains(&format!("{named}: fencer cannot write there: ")),
            "{args:?}: {err}"
        );
        assert!(err.contains("(os error "), "{args:?}: {err}");
        assert!(!stdout(&output).contains("verdict:"), "{args:?} ran");
    }
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    // Nothing was made, not even the --out of the gate whose --junit place was refused.
    assert_eq!(names, ["a-file", "read-only"]);
}

#[test]
fn run_then_replay_is_byte_identical_and_keeps_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let run = fencer(&["run", "--seed", "5", "--ops", "20"], dir.path());
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}{}",
        stdout(&run),
        stderr(&run)
    );
    let latest = dir.path().join("runs/latest");
    for file in ["run.json", "plan.json", "history.jsonl", "verdict.json"] {
        assert!(latest.join(file).is_file(), "{file} missing");
    }
    let replay = fencer(&["replay", "runs/latest"], dir.path());
    let out = stdout(&replay);
    assert_eq!(replay.status.code(), Some(0), "{out}{}", stderr(&replay));
    let hashes: Vec<&str> = out
        .lines()
        .filter(|line| line.contains("history sha256"))
        .map(|line| line.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(hashes.len(), 2, "{out}");
    assert_eq!(hashes[0], hashes[1]);
    assert!(out.contains("identical:"), "{out}");
    // Running a simulated plan again and again tells nothing one run does not.
    let runs = fencer(&["replay", "runs/latest", "--runs", "3"], dir.path());
    assert_eq!(runs.status.code(), Some(254), "{}", stdout(&runs));
    assert!(
        stderr(&runs).contains("--runs 3: runs/latest is a simulated run"),
        "{}",
        stderr(&runs)
    );
}

#[test]
fn a_backing_off_run_saves_its_wait_mode_and_replays_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let output = fencer(args, dir.path());
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        output
    };
    // Five cycles each for `workers` workers into `out`, waiting as `wait` says (or as the
    // default picks, without it).
    let crowd = |workers: &str, wait: &[&str], out: &str| {
        let args = [
            &["run", "--workers", workers, "--ops", "5"],
            wait,
            &["--out", out],
        ];
        run(&args.concat())
    };
    crowd("20", &["--wait", "backoff"], "b");
    crowd("20", &["--wait", "poll"], "p");
    crowd("20", &[], "crowd");
    crowd("10", &[], "few");
    let plan = |name: &str| std::fs::read_to_string(dir.path().join(name).join("plan.json"));
    assert!(plan("b").unwrap().contains("\"wait\": \"backoff\""));
    assert!(
        !plan("p").unwrap().contains("\"wait\""),
        "a polling plan reads as one written before wait modes existed"
    );
    let history = |name: &str| std::fs::read(dir.path().join(name).join("history.jsonl")).unwrap();
    assert_ne!(history("b"), history("p"), "the workers waited differently");
    assert_eq!(
        history("crowd"),
        history("b"),
        "with no --wait, twenty workers back off"
    );
    assert!(
        !plan("few").unwrap().contains("\"wait\""),
        "with no --wait, ten workers poll"
    );
    let replay = run(&["replay", "b"]);
    assert!(
        stdout(&replay).contains("identical:"),
        "{}",
        stdout(&replay)
    );
    assert_bad_input(
        &["run", "--plan", "plan.json", "--wait", "backoff"],
        "cannot be used with",
    );
}

#[test]
fn mutant_run_exits_1_and_its_replay_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "run",
        "--seed",
        "1",
        "--ops",
        "20",
        "--store",
        "sqlite-unfenced",
        "--nemesis",
        "pause",
        "--on-renew-failure",
        "continue",
        "--out",
        "r",
    ];
    let run = fencer(&args, dir.path());
    assert_eq!(
        run.status.code(),
        Some(1),
        "{}{}",
        stdout(&run),
        stderr(&run)
    );
    assert!(
        stdout(&run).contains("stale-write-accepted"),
        "{}",
        stdout(&run)
    );
    let replay = fencer(&["replay", "r"], dir.path());
    assert_eq!(replay.status.code(), Some(1), "{}", stderr(&replay));
    let check = fencer(&["check", "r/history.jsonl"], dir.path());
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
}

#[test]
fn replay_of_missing_or_corrupt_directory_exits_254_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = fencer(&["replay", "no-such-run"], dir.path());
    assert_eq!(missing.status.code(), Some(254));
    assert_eq!(stderr(&missing).lines().count(), 1, "{}", stderr(&missing));
    assert!(stderr(&missing).contains("not a run directory"));

    let run = fencer(&["run", "--ops", "2", "--out", "r"], dir.path());
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));

    std::fs::write(
        dir.path().join("r/plan.json"),
        b"{\n \"format\": 1,\n oops\n}",
    )
    .unwrap();
    let corrupt = fencer(&["replay", "r"], dir.path());
    assert_eq!(corrupt.status.code(), Some(254));
    assert_eq!(stderr(&corrupt).lines().count(), 1, "{}", stderr(&corrupt));
    assert!(
        stderr(&corrupt).contains("r/plan.json:3:"),
        "{}",
        stderr(&corrupt)
    );

    std::fs::remove_file(dir.path().join("r/run.json")).unwrap();
    let no_record = fencer(&["replay", "r"], dir.path());
    assert_eq!(no_record.status.code(), Some(254));
    assert!(
        stderr(&no_record).contains("run.json: missing"),
        "{}",
        stderr(&no_record)
    );
}

#[test]
fn tampered_history_is_refused_before_replaying() {
    let dir = tempfile::tempdir().unwrap();
    let run = fencer(&["run", "--ops", "2", "--out", "r"], dir.path());
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let path = dir.path().join("r/history.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&path, bytes).unwrap();
    let replay = fencer(&["replay", "r"], dir.path());
    assert_eq!(replay.status.code(), Some(254));
    assert!(
        stderr(&replay).contains("was modified"),
        "{}",
        stderr(&replay)
    );
}

/// Rewrites the saved run in `dir` so its plan says `format` and its history's last line
/// differs, with run.json's hash to match: a run whose replay cannot reproduce it.
fn record_otherwise(dir: &std::path::Path, format: u64) {
    let plan_path = dir.join("plan.json");
    let mut plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&plan_path).unwrap()).unwrap();
    plan["format"] = format.into();
    std::fs::write(&plan_path, serde_json::to_vec_pretty(&plan).unwrap()).unwrap();
    let history_path = dir.join("history.jsonl");
    let text = std::fs::read_to_string(&history_path).unwrap();
    let (rest, last) = text.trim_end().rsplit_once('\n').unwrap();
    let mut event: serde_json::Value = serde_json::from_str(last).unwrap();
    event["time_ns"] = (event["time_ns"].as_u64().unwrap() + 1).into();
    let history = format!("{rest}\n{}\n", serde_json::to_string(&event).unwrap());
    std::fs::write(&history_path, &history).unwrap();
    let run_path = dir.join("run.json");
    let mut run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&run_path).unwrap()).unwrap();
    run["history_sha256"] = fencer_harness::history::sha256_hex(history.as_bytes()).into();
    std::fs::write(&run_path, serde_json::to_vec_pretty(&run).unwrap()).unwrap();
}

#[test]
fn a_replay_that_diverges_says_why_an_older_format_may_and_a_current_one_must_not() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["old", "new"] {
        let run = fencer(&["run", "--ops", "2", "--out", name], dir.path());
        assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    }
    record_otherwise(&dir.path().join("old"), 3);
    let replay = fencer(&["replay", "old"], dir.path());
    assert_eq!(replay.status.code(), Some(254), "{}", stderr(&replay));
    let why = stderr(&replay);
    assert!(why.contains("recorded with plan format 3"), "{why}");
    assert!(why.contains("courier task"), "{why}");
    assert!(why.contains("run --plan old/plan.json"), "{why}");
    record_otherwise(&dir.path().join("new"), fencer_run::PLAN_FORMAT.into());
    let replay = fencer(&["replay", "new"], dir.path());
    assert_eq!(replay.status.code(), Some(255), "{}", stderr(&replay));
    assert!(
        stderr(&replay).contains("not deterministic"),
        "{}",
        stderr(&replay)
    );
}

#[test]
fn check_reports_malformed_history_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("h.jsonl"),
        "{\"index\":0,\"time_ns\":0,\"process\":\"w0\",\"type\":\"invoke\",\"f\":\"read\"}\n{broken\n",
    )
    .unwrap();
    let output = fencer(&["check", "h.jsonl"], dir.path());
    assert_eq!(output.status.code(), Some(254));
    assert!(
        stderr(&output).contains("h.jsonl:2:"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn demo_prints_the_articles_three_lines_and_points_at_both_runs() {
    let dir = tempfile::tempdir().unwrap();
    let output = fencer(&["demo"], dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "owner comparison: B lease survives",
            "unprotected resource: late A result",
            "fenced resource: B result",
        ]
    );
    assert!(
        lines[3].starts_with("unfenced run: runs/demo/unfenced-"),
        "{out}"
    );
    assert!(
        lines[4].starts_with("fenced run: runs/demo/fenced-"),
        "{out}"
    );
    assert!(lines[3].contains("invalid"), "{out}");
}

/// The mutant run of [`mutant_run_exits_1_and_its_replay_agrees`] at full length, saved in `r`:
/// more stale writes than a summary prints, and warnings beside them.
const UNFENCED: [&str; 9] = [
    "run",
    "--seed",
    "1",
    "--store",
    "sqlite-unfenced",
    "--on-renew-failure",
    "continue",
    "--out",
    "r",
];

#[test]
fn a_failing_run_says_how_to_reproduce_it_and_where_to_look() {
    let dir = tempfile::tempdir().unwrap();
    let run = fencer(&UNFENCED, dir.path());
    let out = stdout(&run);
    assert_eq!(run.status.code(), Some(1), "{out}{}", stderr(&run));
    for line in [
        "reproduce: fencer replay r\n",
        "timeline: r/timeline.html\n",
        "explain: fencer explain r\n",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
    assert!(dir.path().join("r/timeline.html").is_file());
    let command = out
        .lines()
        .find_map(|line| line.strip_prefix("reproduce: fencer run "))
        .unwrap_or_else(|| panic!("no run command:\n{out}"));
    let mut args = vec!["run"];
    args.extend(command.split(' '));
    args.extend(["--out", "again"]);
    let again = fencer(&args, dir.path());
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert_eq!(
        std::fs::read(dir.path().join("again/history.jsonl")).unwrap(),
        std::fs::read(dir.path().join("r/history.jsonl")).unwrap(),
        "the printed command runs the same history"
    );

    // Saved in the archive, the run is also one of those `serve` lists.
    let archived = fencer(&UNFENCED[..7], dir.path());
    assert!(
        stdout(&archived).contains("(every saved run: fencer serve runs)"),
        "{}",
        stdout(&archived)
    );
    let valid = fencer(&["run", "--ops", "2", "--out", "ok"], dir.path());
    assert_eq!(valid.status.code(), Some(0), "{}", stderr(&valid));
    assert!(!stdout(&valid).contains("reproduce:"), "{}", stdout(&valid));
}

#[test]
fn warnings_are_counted_on_the_verdict_line_and_told_on_request() {
    let dir = tempfile::tempdir().unwrap();
    // Seed 0's ten cycles end valid with a superseded write: fencing's documented limit.
    let args = ["run", "--ops", "10", "--out", "r"];
    let run = fencer(&args, dir.path());
    let out = stdout(&run);
    assert_eq!(run.status.code(), Some(0), "{out}{}", stderr(&run));
    let verdict = out
        .lines()
        .find(|line| line.starts_with("verdict: "))
        .unwrap();
    assert!(
        verdict.starts_with("verdict: valid: ")
            && verdict.contains("; warnings: ")
            && verdict.contains(" superseded-write-accepted")
            && verdict.ends_with(
                "(warnings fail only under --strict; told in full: fencer explain r or --verbose)"
            ),
        "{verdict}"
    );
    assert!(!out.contains("\n- "), "no finding told in full:\n{out}");
    let warnings: usize = verdict
        .split("; warnings: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .expect("a count of warnings");

    let verbose = fencer(
        &["run", "--ops", "10", "--out", "v", "--verbose"],
        dir.path(),
    );
    let told = stdout(&verbose)
        .lines()
        .filter(|line| line.starts_with("- superseded-write-accepted (warning): "))
        .count();
    assert_eq!(told, warnings, "{}", stdout(&verbose));
    let explained = fencer(&["explain", "r"], dir.path());
    assert_eq!(
        stdout(&explained)
            .matches(": superseded-write-accepted\n")
            .count(),
        warnings,
        "{}",
        stdout(&explained)
    );
}

#[test]
fn anomalies_beyond_the_first_are_counted_apart_from_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let run = fencer(&UNFENCED, dir.path());
    let out = stdout(&run);
    assert_eq!(run.status.code(), Some(1), "{out}{}", stderr(&run));
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r/verdict.json")).unwrap()).unwrap();
    let failing: u64 = verdict["anomaly_counts"]
        .as_object()
        .unwrap()
        .values()
        .map(|count| count.as_u64().unwrap())
        .sum();
    assert!(
        failing > 5 && verdict["warning_counts"].as_object().is_some(),
        "the scenario has more anomalies than a summary tells, and warnings: {verdict}"
    );
    assert_eq!(
        out.matches("\n- stale-write-accepted: ").count(),
        5,
        "{out}"
    );
    let more = format!(
        "  ... {} more anomalies: fencer explain r --all or --verbose\n",
        failing - 5
    );
    assert!(out.contains(&more), "{more:?} missing:\n{out}");

    // `check` saves nothing, so it points at nothing saved.
    let before: Vec<_> = std::fs::read_dir(dir.path().join("r")).unwrap().collect();
    let check = fencer(&["check", "r/history.jsonl"], dir.path());
    let checked = stdout(&check);
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
    let more = format!("  ... {} more anomalies: --verbose\n", failing - 5);
    assert!(checked.contains(&more), "{more:?} missing:\n{checked}");
    assert!(!checked.contains("verdict.json"), "{checked}");
    let after: Vec<_> = std::fs::read_dir(dir.path().join("r")).unwrap().collect();
    assert_eq!(before.len(), after.len(), "check wrote nothing");
    let verbose = fencer(&["check", "r/history.jsonl", "--verbose"], dir.path());
    let anomaly_lines = stdout(&verbose)
        .lines()
        .filter(|line| line.starts_with("- ") && !line.contains(" (warning): "))
        .count();
    assert_eq!(anomaly_lines as u64, failing, "{}", stdout(&verbose));
}

#[test]
fn nemesis_groups_combine_with_named_families() {
    let dir = tempfile::tempdir().unwrap();
    let nemesis = |list: &str, out: &str| {
        let run = fencer(
            &["run", "--ops", "2", "--nemesis", list, "--out", out],
            dir.path(),
        );
        assert_eq!(run.status.code(), Some(0), "{list}: {}", stderr(&run));
        let plan: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(out).join("plan.json")).unwrap())
                .unwrap();
        plan["settings"]["nemesis"].clone()
    };
    let all = nemesis("all", "all");
    assert!(
        all.as_array().unwrap().contains(&"drop-write".into()),
        "{all}"
    );
    assert_eq!(nemesis("all,drop-write", "all-drop-write"), all);
    let default_drop_write = nemesis("default,drop-write", "default-drop-write");
    let defaults = nemesis("default", "default");
    let mut expected = defaults.as_array().unwrap().clone();
    expected.push("drop-write".into());
    let mut got = default_drop_write.as_array().unwrap().clone();
    let key = |value: &serde_json::Value| value.as_str().unwrap().to_string();
    expected.sort_by_key(key);
    got.sort_by_key(key);
    assert_eq!(got, expected);
    assert_bad_input(&["run", "--nemesis", "none,pause"], "`none` stands alone");
}

#[test]
fn a_url_of_a_scheme_nothing_serves_is_refused_before_the_run() {
    for (flag, url, needle) in [
        (
            "--store",
            "mysql://u:pw@h/db",
            "unsupported store URL scheme `mysql` in mysql://u:***@h/db: this build's store URLs \
             are redis://",
        ),
        (
            "--lock",
            "sqlite:///tmp/register.db",
            "unsupported lock URL scheme `sqlite` in sqlite:///tmp/register.db",
        ),
    ] {
        assert_bad_input(&["run", flag, url], needle);
        assert_bad_input(&["run", flag, url], "private:redis");
        let dir = tempfile::tempdir().unwrap();
        let output = fencer(&["run", flag, url], dir.path());
        assert_eq!(stdout(&output), "", "nothing ran");
    }
}

#[test]
fn an_out_directory_that_exists_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("r")).unwrap();
    std::fs::write(dir.path().join("r/keep.txt"), b"mine").unwrap();
    let output = fencer(&["run", "--out", "r"], dir.path());
    assert_eq!(output.status.code(), Some(254), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("r: already exists and is not empty; choose another --out"),
        "{}",
        stderr(&output)
    );
    assert_eq!(stdout(&output), "", "nothing ran");
    assert_eq!(
        std::fs::read(dir.path().join("r/keep.txt")).unwrap(),
        b"mine"
    );
    // An empty directory is free to take the run.
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let output = fencer(&["run", "--ops", "2", "--out", "empty"], dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(dir.path().join("empty/history.jsonl").is_file());
}

#[test]
fn version_names_the_git_commit_it_was_built_from() {
    let dir = tempfile::tempdir().unwrap();
    let output = fencer(&["--version"], dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let package = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // A packaged crate is no checkout, whatever repository may hold it.
    let packaged = package.join("Cargo.toml.orig").exists();
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(package)
        .output()
        .ok()
        .filter(|output| output.status.success() && !packaged)
        .map_or_else(
            || "unknown".to_string(),
            |output| String::from_utf8(output.stdout).unwrap().trim().to_string(),
        );
    assert_eq!(
        stdout(&output),
        format!("fencer {} (commit {commit})\n", env!("CARGO_PKG_VERSION"))
    );
}
