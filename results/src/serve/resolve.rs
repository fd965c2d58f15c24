//! Which file a URL path names, if any: only files inside the archive, never outside it.
//!
//! A path is percent-decoded once, split into segments, and refused if any segment is `.` or
//! `..`, holds a backslash or a NUL, or is not UTF-8. The joined path is then canonicalised
//! (following symlinks) and must still lie inside the canonical archive root, so neither an
//! encoded `%2e%2e` nor a symlink pointing out of the archive escapes it.

use std::path::{Path, PathBuf};

/// Decodes `%XX` escapes; `None` when an escape is malformed or the result is not UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The safe, existing path inside `root` (already canonical) that `url_path` names, or `None`.
pub fn resolve(root: &Path, url_path: &str) -> Option<PathBuf> {
    let path = url_path.split(['?', '#']).next()?;
    let rest = path.strip_prefix('/')?;
    let decoded = percent_decode(rest)?;
    let mut joined = root.to_path_buf();
    for segment in decoded.split('/') {
        if segment.is_empty() {
            continue;
        }
        if segment == "." || segment == ".." || segment.contains(['\\', '\0']) {
            return None;
        }
        joined.push(segment);
    }
    let canonical = joined.canonicalize().ok()?;
    canonical.starts_with(root).then_some(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_handles_escapes_and_refuses_broken_ones() {
        assert_eq!(percent_decode("a%20b%2e").as_deref(), Some("a b."));
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%2"), None);
        assert_eq!(percent_decode("%ff"), None);
    }

    #[test]
    fn traversal_in_every_spelling_is_refused_and_files_inside_are_found() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("archive");
        std::fs::create_dir_all(root.join("w/run")).unwrap();
        std::fs::write(root.join("w/run/verdict.json"), b"{}").unwrap();
        std::fs::write(outer.path().join("secret"), b"x").unwrap();
        let root = root.canonicalize().unwrap();
        assert_eq!(
            resolve(&root, "/w/run/verdict.json?x=1"),
            Some(root.join("w/run/verdict.json"))
        );
        assert_eq!(resolve(&root, "/"), Some(root.clone()));
        for attack in [
            "/../secret",
            "/w/../../secret",
            "/%2e%2e/secret",
            "/%2E%2E%2Fsecret",
            "/w/run/..%2f..%2f..%2fsecret",
            "/..\\secret",
            "//../secret",
            "secret",
            "http://host/../secret",
            "/w/%00",
        ] {
            assert_eq!(resolve(&root, attack), None, "{attack}");
        }
        // Absolute paths are taken inside the archive, where they do not exist.
        assert_eq!(resolve(&root, "/etc/passwd"), None);
        assert_eq!(resolve(&root, "//etc/passwd"), None);
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_out_of_the_archive_are_refused_and_inside_it_followed() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("archive");
        std::fs::create_dir_all(root.join("w/run")).unwrap();
        std::fs::write(outer.path().join("secret"), b"x").unwrap();
        std::os::unix::fs::symlink(outer.path().join("secret"), root.join("escape")).unwrap();
        std::os::unix::fs::symlink("w/run", root.join("latest")).unwrap();
        let root = root.canonicalize().unwrap();
        assert_eq!(resolve(&root, "/escape"), None);
        assert_eq!(resolve(&root, "/latest"), Some(root.join("w/run")));
    }
}
