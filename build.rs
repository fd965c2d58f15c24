//! Puts the git commit fencer is built from into `fencer --version`, as `FENCER_GIT_COMMIT`:
//! a failure report then names the exact source. A packaged crate (`cargo package`, a
//! registry, `cargo vendor`), a source tarball or a machine without `git` gives `unknown`.
//! Nothing else of the build environment (time, host, tree state) goes in, so one commit
//! always builds the same binary.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let package = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    // A packaged crate carries these; a repository around it (a project vendoring fencer)
    // is not fencer's, so its commit would be a lie.
    let packaged = ["Cargo.toml.orig", ".cargo_vcs_info.json"]
        .iter()
        .any(|name| package.join(name).exists());
    let commit = (!packaged)
        .then(|| git(&package, &["rev-parse", "--short=12", "HEAD"]))
        .flatten();
    println!(
        "cargo:rustc-env=FENCER_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=GIT_DIR");
    if commit.is_none() {
        return;
    }
    // Run again when HEAD moves (a commit, a checkout, refs packed). Only files that exist
    // are watched: a missing one would make cargo run this script on every build.
    let mut watched = Vec::new();
    if let Some(git_dir) = git(&package, &["rev-parse", "--git-dir"]) {
        watched.push(package.join(git_dir).join("HEAD"));
    }
    if let Some(common_dir) = git(&package, &["rev-parse", "--git-common-dir"]) {
        let common_dir = package.join(common_dir);
        watched.push(common_dir.join("packed-refs"));
        if let Some(branch) = git(&package, &["symbolic-ref", "-q", "HEAD"]) {
            watched.push(common_dir.join(branch));
        }
    }
    for path in watched.iter().filter(|path| path.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// The trimmed output of `git ARGS` run in `dir`, if git ran, succeeded and said something.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (output.status.success() && !text.is_empty()).then(|| text.to_string())
}
