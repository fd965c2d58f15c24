//! Backend addresses: which scheme names which backend, and how a URL is shown without its
//! credentials.
//!
//! A URL may carry a password (`postgres://user:secret@host/db`); fencer prints URLs in
//! summaries, errors and saved settings, so every one of those goes through [`redact_url`].

use crate::error::BackendError;

/// `scheme://user:secret@host/…` → `scheme://user:***@host/…`; a URL without a password is
/// returned unchanged. Also hides `password=` query parameters.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _secret)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = redact_query_password(tail);
    format!("{scheme}://{authority}{tail}")
}

fn redact_query_password(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_string();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if name.eq_ignore_ascii_case("password") => format!("{name}=***"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// The scheme of `url` (`redis`, `postgres`), if it has one.
pub fn scheme_of(url: &str) -> Option<&str> {
    url.split_once("://").map(|(scheme, _)| scheme)
}

/// `url` as it may be shown ([`redact_url`]) if its scheme is one of `schemes`; otherwise an
/// error naming the URL form a backend expects (`form`: `a redis://host:port URL`) and the
/// scheme found, so every backend refuses a wrong URL in the same words.
pub fn shown_if_scheme(url: &str, schemes: &[&str], form: &str) -> Result<String, BackendError> {
    let shown_url = redact_url(url);
    match scheme_of(url) {
        Some(scheme) if schemes.contains(&scheme) => Ok(shown_url),
        other => Err(BackendError::BadUrl(format!(
            "expected {form}, found scheme `{}` in {shown_url}",
            other.unwrap_or("")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden_and_everything_else_kept() {
        assert_eq!(
            redact_url("postgres://alice:s3cret@db.example:5432/test"),
            "postgres://alice:***@db.example:5432/test"
        );
        assert_eq!(
            redact_url("redis://:hunter2@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            redact_url("postgres://u@h/db?sslmode=disable&password=pw"),
            "postgres://u@h/db?sslmode=disable&password=***"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(redact_url("not a url"), "not a url");
    }

    #[test]
    fn a_wrong_scheme_is_refused_in_words_without_the_password() {
        assert_eq!(
            shown_if_scheme("zk://h:1", &["zk", "zookeeper"], "a zk://host:port URL"),
            Ok("zk://h:1".to_string())
        );
        assert_eq!(
            shown_if_scheme("redis://u:pw@h:1", &["zk"], "a zk://host:port URL"),
            Err(BackendError::BadUrl(
                "expected a zk://host:port URL, found scheme `redis` in redis://u:***@h:1".into()
            ))
        );
        assert!(
            shown_if_scheme("h:1", &["zk"], "x")
                .unwrap_err()
                .to_string()
                .contains("scheme ``")
        );
    }

    #[test]
    fn scheme_is_what_comes_before_the_separator() {
        assert_eq!(scheme_of("redis://x"), Some("redis"));
        assert_eq!(scheme_of("sqlite"), None);
    }
}
