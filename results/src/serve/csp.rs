//! The viewer's Content-Security-Policy. A page may run one script, the timeline's own, named by
//! its SHA-256 (`script-src 'sha256-…'`): a script that reached a served file any other way (a
//! string a report failed to escape, an HTML file someone put in the archive) does not run.
//! Styles stay inline (the reports carry `style` attributes); nothing is fetched but same-origin
//! and `data:` images, so a run's report can never call out to the network.

use std::sync::LazyLock;

use sha2::{Digest, Sha256};

use crate::report::timeline::SCRIPT;

/// The policy's value, computed once from the script the timeline inlines.
pub static POLICY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'unsafe-inline'; \
         img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        base64(&Sha256::digest(SCRIPT.as_bytes()))
    )
});

/// Standard base64 with padding (RFC 4648 §4), as CSP hash sources are written.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let group = chunk.iter().enumerate().fold(0u32, |group, (i, &byte)| {
            group | u32::from(byte) << (16 - 8 * i)
        });
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(group >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_4648_vectors() {
        for (text, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(text.as_bytes()), encoded, "{text:?}");
        }
    }

    #[test]
    fn only_the_timeline_script_may_run() {
        let scripts = POLICY
            .split("; ")
            .find_map(|directive| directive.strip_prefix("script-src "))
            .expect("a script-src directive");
        assert!(!scripts.contains("unsafe-inline"), "{scripts}");
        let hash = Sha256::digest(SCRIPT.as_bytes());
        assert_eq!(scripts, format!("'sha256-{}'", base64(&hash)));
        assert_eq!(scripts.len(), "'sha256-'".len() + 44);
    }
}
