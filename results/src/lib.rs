//! Everything a finished run leaves behind, and how a person reads it.
//!
//! A run directory holds `run.json` (what was run), `plan.json` (the unit of replay),
//! `history.jsonl` (the artifact), `verdict.json` (what the checkers said) and the reports
//! (`timeline.html`, SVG plots). Run directories are written whole or not at all: files go into
//! a hidden sibling directory that is renamed into place last, so a crash or a full disk never
//! leaves a half-written run that `replay` would misread. Saved runs live in the run
//! [`archive`]; [`serve`] lists and serves them.

pub mod archive;
pub mod report;
pub mod run_dir;
pub mod save;
pub mod serve;
pub mod staging;

pub use archive::{Archive, utc_stamp};
pub use run_dir::{
    RunDirError, RunRecord, StagedRunDir, check_dir_writable, check_run_place, parse_run_json,
    read_run_file, write_run_dir,
};
pub use save::{
    FinishedRun, SaveError, SavedUnfinished, default_run_dir, save_run, save_unfinished,
};
