//! The archive's index page: every run (a directory holding `run.json`), newest first, with its
//! seed, workload, backends, verdict and date, filterable by verdict; and a plain listing of
//! one directory's files.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::RunRecord;
use crate::report::PLOT_FILES;
use crate::report::escape;

use crate::report::TIMELINE_FILE;

/// Directories deeper than this below the archive root are not searched for runs.
const MAX_DEPTH: usize = 3;

/// At most this many runs are listed; an archive bigger than that is listed newest first up to it.
const MAX_RUNS: usize = 5_000;

/// One run found in the archive.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEntry {
    /// Path relative to the archive root, with `/` separators.
    pub path: String,
    /// What `run.json` says.
    pub record: RunRecord,
}

/// Every run under `root`, newest first (by `written_at`, then path). Hidden directories
/// (partial writes) and symlinks (`latest`) are skipped, so each run is listed once.
pub fn find_runs(root: &Path) -> Vec<RunEntry> {
    let mut runs = Vec::new();
    let mut pending: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut children: Vec<_> = entries.filter_map(Result::ok).collect();
        children.sort_by_key(|entry| entry.file_name());
        for entry in children {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if name.starts_with('.') || !kind.is_dir() {
                continue;
            }
            let path = entry.path();
            if let Ok(bytes) = std::fs::read(path.join("run.json"))
                && let Ok(record) = serde_json::from_slice::<RunRecord>(&bytes)
            {
                let relative = path.strip_prefix(root).unwrap_or(&path);
                let parts: Vec<String> = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                runs.push(RunEntry {
                    path: parts.join("/"),
                    record,
                });
            } else if depth + 1 < MAX_DEPTH {
                pending.push((path, depth + 1));
            }
        }
    }
    runs.sort_by(|a, b| (&b.record.written_at, &b.path).cmp(&(&a.record.written_at, &a.path)));
    runs.truncate(MAX_RUNS);
    runs
}

/// `20261130T044321Z` → `2026-11-30 04:43:21Z`; anything else as it is.
fn pretty_date(stamp: &str) -> String {
    let b = stamp.as_bytes();
    if b.len() == 16 && b[8] == b'T' && b[15] == b'Z' && stamp.is_ascii() {
        format!(
            "{}-{}-{} {}:{}:{}Z",
            &stamp[0..4],
            &stamp[4..6],
            &stamp[6..8],
            &stamp[9..11],
            &stamp[11..13],
            &stamp[13..15]
        )
    } else {
        stamp.to_string()
    }
}

fn setting(record: &RunRecord, name: &str) -> String {
    match record.settings.get(name) {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => "?".into(),
    }
}

/// Percent-encodes an archive-relative path for an `href`, keeping `/`.
fn href(path: &str) -> String {
    let mut out = String::new();
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:16px}table{border-collapse:collapse}\
td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}.invalid{color:#b00020;font-weight:600}\
.valid{color:#1b7f3b}.unknown{color:#a66b00}nav a{margin-right:10px}nav a.on{font-weight:700}";

/// The index page, showing only runs whose validity is `verdict` when one is given.
pub fn index_page(runs: &[RunEntry], verdict: Option<&str>) -> String {
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\"><title>fencer runs</title>\
         <style>{STYLE}</style></head><body>\n<h1>fencer runs</h1>\n<nav id=\"filter\">verdict: "
    );
    for (label, value) in [
        ("all", None),
        ("invalid", Some("invalid")),
        ("unknown", Some("unknown")),
        ("valid", Some("valid")),
    ] {
        let target = value.map_or("/".to_string(), |v| format!("/?verdict={v}"));
        let on = if value == verdict {
            " class=\"on\""
        } else {
            ""
        };
        let _ = write!(page, "<a href=\"{target}\"{on}>{label}</a>");
    }
    page.push_str(
        "</nav>\n<table id=\"runs\"><thead><tr><th>date (UTC)</th><th>seed</th><th>workload</th>\
                   <th>backend</th><th>verdict</th><th>files</th></tr></thead><tbody>\n",
    );
    let shown: Vec<&RunEntry> = runs
        .iter()
        .filter(|run| verdict.is_none_or(|v| run.record.validity == v))
        .collect();
    for run in &shown {
        let base = href(&run.path);
        let record = &run.record;
        let mut files = format!("<a href=\"/{base}/{TIMELINE_FILE}\">timeline</a>");
        for plot in PLOT_FILES {
            let name = plot.trim_end_matches(".svg");
            let _ = write!(files, " <a href=\"/{base}/{plot}\">{name}</a>");
        }
        for file in ["history.jsonl", "verdict.json", "plan.json", "run.json"] {
            let _ = write!(files, " <a href=\"/{base}/{file}\">{file}</a>");
        }
        let _ = writeln!(
            page,
            "<tr class=\"run\" data-verdict=\"{v}\"><td><a href=\"/{base}/\">{date}</a></td><td>{seed}</td><td>{workload}</td>\
             <td>lock {lock}, store {store}</td><td class=\"{v}\">{v}</td><td>{files}</td></tr>",
            v = escape::text(&record.validity),
            date = escape::text(&pretty_date(&record.written_at)),
            seed = escape::text(&setting(record, "seed")),
            workload = escape::text(&setting(record, "workload")),
            lock = escape::text(&setting(record, "lock")),
            store = escape::text(&setting(record, "store")),
        );
    }
    let _ = write!(
        page,
        "</tbody></table>\n<p>{} of {} runs shown.</p></body></html>\n",
        shown.len(),
        runs.len()
    );
    page
}

/// A plain listing of `dir`; `url` is the path it was requested by (still percent-encoded).
pub fn directory_page(dir: &Path, url: &str) -> String {
    let mut names: Vec<(String, bool)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
                .map(|entry| {
                    let is_dir = entry.path().is_dir();
                    (entry.file_name().to_string_lossy().into_owned(), is_dir)
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\"><title>{0}</title>\
         <style>{STYLE}</style></head><body><h1>{0}</h1><p><a href=\"/\">all runs</a></p><ul>\n",
        escape::text(url)
    );
    for (name, is_dir) in names {
        let slash = if is_dir { "/" } else { "" };
        // Absolute links, so they work whether or not the request ended in `/`.
        let _ = writeln!(
            page,
            "<li><a href=\"{}/{}{slash}\">{}{slash}</a></li>",
            escape::text(url.trim_end_matches('/')),
            href(&name),
            escape::text(&name)
        );
    }
    page.push_str("</ul></body></html>\n");
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seed: u64, validity: &str, written_at: &str, store: &str) -> RunRecord {
        RunRecord {
            fencer_version: "0".into(),
            command: "run".into(),
            settings: serde_json::json!({
                "seed": seed, "workload": "fenced-register", "lock": "sim", "store": store
            }),
            events: 1,
            history_sha256: String::new(),
            validity: validity.into(),
            written_at: written_at.into(),
            left_out: Vec::new(),
            coverage: None,
            cycle_starts_ns: Vec::new(),
            interrupted_at_ns: None,
        }
    }

    fn write_run(root: &Path, path: &str, record: &RunRecord) {
        let dir = root.join(path);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("run.json"), serde_json::to_vec(record).unwrap()).unwrap();
    }

    #[test]
    fn runs_are_listed_newest_first_once_and_filtered_by_verdict() {
        let root = tempfile::tempdir().unwrap();
        write_run(
            root.path(),
            "fenced-register/1-a",
            &record(1, "invalid", "20261130T010000Z", "sqlite-unfenced"),
        );
        write_run(
            root.path(),
            "fenced-register/2-b",
            &record(2, "valid", "20261130T020000Z", "sqlite"),
        );
        write_run(
            root.path(),
            "demo/.x.partial-1",
            &record(3, "valid", "20261130T030000Z", "sqlite"),
        );
        #[cfg(unix)]
        std::os::unix::fs::symlink("fenced-register/2-b", root.path().join("latest")).unwrap();
        let runs = find_runs(root.path());
        let paths: Vec<&str> = runs.iter().map(|run| run.path.as_str()).collect();
        assert_eq!(paths, ["fenced-register/2-b", "fenced-register/1-a"]);
        let all = index_page(&runs, None);
        assert_eq!(all.matches("<tr class=\"run\"").count(), 2);
        assert!(all.find("2026-11-30 02:00:00Z") < all.find("2026-11-30 01:00:00Z"));
        let invalid = index_page(&runs, Some("invalid"));
        assert_eq!(invalid.matches("<tr class=\"run\"").count(), 1);
        assert!(invalid.contains("store sqlite-unfenced"), "{invalid}");
        assert!(invalid.contains("href=\"/fenced-register/1-a/timeline.html\""));
    }

    #[test]
    fn directory_links_are_absolute_and_escaped() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("sub")).unwrap();
        std::fs::write(root.path().join("a b.json"), b"{}").unwrap();
        let page = directory_page(root.path(), "/w/\"run");
        assert!(
            page.contains("<a href=\"/w/&quot;run/a%20b.json\">a b.json</a>"),
            "{page}"
        );
        assert!(
            page.contains("<a href=\"/w/&quot;run/sub/\">sub/</a>"),
            "{page}"
        );
    }

    #[test]
    fn hostile_names_are_escaped_in_the_index() {
        let root = tempfile::tempdir().unwrap();
        write_run(
            root.path(),
            "w/<script>x",
            &record(1, "valid", "20261130T010000Z", "<script>alert(1)</script>"),
        );
        let page = index_page(&find_runs(root.path()), None);
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("href=\"/w/%3Cscript%3Ex/\""), "{page}");
    }
}
