//! The keys a store adapter has written (or the locks a lock adapter has called), so its
//! `applied_log` (or `lock_log`) knows whose logs to read back: a real server's log is kept per
//! key or lock, and fencer must not scan a shared server for other runs' keys.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// Keys written through one adapter, in sorted order (so logs are read in a fixed order).
#[derive(Debug, Default)]
pub struct WrittenKeys(Mutex<BTreeSet<String>>);

impl WrittenKeys {
    /// Remembers `key` (before its write is sent: a write whose reply is lost may have applied).
    pub fn note(&self, key: &str) {
        let mut keys = self.0.lock().unwrap_or_else(|poison| poison.into_inner());
        if !keys.contains(key) {
            keys.insert(key.to_string());
        }
    }

    /// Every key noted so far, sorted.
    pub fn all(&self) -> Vec<String> {
        let keys = self.0.lock().unwrap_or_else(|poison| poison.into_inner());
        keys.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_back_once_each_in_order() {
        let keys = WrittenKeys::default();
        for key in ["b", "a", "b"] {
            keys.note(key);
        }
        assert_eq!(keys.all(), ["a", "b"]);
    }
}
