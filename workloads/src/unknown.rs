//! The one way a worker setting's name is wrong: it names none of the setting's values.

/// A name that is none of a setting's values: which setting, what was found, and what it
/// takes, as the command line and a plan file both say it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {setting} `{found}`: expected {expected}")]
pub struct UnknownName {
    /// The setting (`worker`, `wait mode`).
    pub setting: &'static str,
    /// The name found.
    pub found: String,
    /// The names it takes, in words.
    pub expected: &'static str,
}
