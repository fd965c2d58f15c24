//! The on-disk run format: a run directory holds `run.json` (what was run), `plan.json` (the
//! unit of replay), `history.jsonl` (the artifact) and `verdict.json` (what the checkers said).
//!
//! Run directories are written whole or not at all: files go into a hidden sibling directory
//! that is renamed into place last, so a crash or a full disk never leaves a half-written run
//! that `replay` would misread.

pub mod report;
pub mod run_dir;
pub mod store;

pub use run_dir::{RunDirError, RunRecord, parse_run_json, read_run_file, write_run_dir};
pub use store::{StoreLayout, utc_stamp};
