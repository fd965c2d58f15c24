//! The SQLite fenced store: a real database doing the fence check and the write in one step.
//!
//! The fenced write is one statement, `UPDATE register SET … WHERE key=? AND fence<=?`; its
//! rowcount is the verdict (0 = rejected, never "success"). Same-generation writes pass:
//! fencing orders holders, it does not deduplicate. Every applied write is also
//! appended to an `applied` table in the same transaction, and to the history as a `log`
//! event, so checkers see the store's true order even when replies were lost.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use fencer_harness::{
    AppliedWrite, CallError, EventType, EventView, FencedStore, FencingToken, Op, ReadValue,
    Recorder, Written,
};
use rusqlite::{Connection, OptionalExtension, params};

/// Which write rule the store follows.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum StoreRules {
    /// Check and write in one statement (`… AND fence <= ?`).
    Fenced,
    /// A plain `UPDATE`: the token is stored but never compared — what most code does.
    Unfenced,
    /// Reads the fence, compares in the application, then writes unconditionally: a newer
    /// holder's write that lands in the `check_gap` between the two statements is overwritten
    /// by the older write that had already passed its check.
    CheckThenWrite {
        /// Time between the check and the write (an application round trip), in nanoseconds.
        check_gap_ns: u64,
    },
    /// The fence is compared as text, not as a number (a fence column declared `TEXT`, a Lua
    /// script comparing `GET`'s string with `ARGV` without `tonumber`): `"10"` sorts before
    /// `"9"`, so once tokens reach another digit the store refuses the new holder's writes as
    /// stale although it never accepted a higher token (and lets some stale ones through).
    RefusesNewer,
    /// A write-back cache in front of the fenced store takes each write as it is sent and
    /// serves reads from it; a write the store then refuses is not evicted, so reads return a
    /// value the store never accepted.
    PhantomRead,
    /// A read-through cache in front of the fenced store (memcached beside the database) is
    /// filled on a read miss and invalidated by no write: for `entry_ttl_ns` after a fill,
    /// reads return the value the key held then, though newer writes have been acknowledged.
    StaleCache {
        /// How long a cache entry serves reads after it was filled, in nanoseconds of the
        /// run's clock.
        entry_ttl_ns: u64,
    },
    /// Runs the fenced `UPDATE` but answers success without reading its rowcount (an ORM's
    /// `save()` that returns no count, an `execute` whose result is dropped): a write the fence
    /// refused is reported applied.
    IgnoresRowcount,
}

/// An entry of the store's cache: the value it answers reads with, and when it was put there
/// (a [`StoreRules::StaleCache`] entry answers for its TTL from then; a
/// [`StoreRules::PhantomRead`] one until the next write replaces it).
#[derive(Debug)]
struct CacheEntry {
    value: ReadValue,
    filled_at: fencer_harness::time::Instant,
}

/// Why the store could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("sqlite store {location}: {source}")]
pub struct StoreError {
    location: String,
    source: rusqlite::Error,
}

/// A fenced register store on SQLite (in memory, or a file several processes can share).
#[derive(Debug)]
pub struct SqliteStore {
    connection: Mutex<Connection>,
    rules: StoreRules,
    recorder: Option<Arc<Recorder>>,
    /// [`StoreRules::PhantomRead`]'s cache (the last write sent to each key) or
    /// [`StoreRules::StaleCache`]'s (the value each key held at its last read miss).
    cache: Mutex<BTreeMap<String, CacheEntry>>,
}

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS register (
        key TEXT PRIMARY KEY,
        fence INTEGER NOT NULL,
        write_id TEXT,
        value TEXT
    );
    CREATE TABLE IF NOT EXISTS applied (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL,
        fence INTEGER NOT NULL,
        write_id TEXT NOT NULL
    );
";

impl SqliteStore {
    /// A private in-memory database: the simulation tier's default.
    pub fn in_memory(
        rules: StoreRules,
        recorder: Option<Arc<Recorder>>,
    ) -> Result<Self, StoreError> {
        Self::from_connection(Connection::open_in_memory(), ":memory:", rules, recorder)
    }

    /// A database file, created if missing; several processes may share it.
    pub fn open(
        path: &Path,
        rules: StoreRules,
        recorder: Option<Arc<Recorder>>,
    ) -> Result<Self, StoreError> {
        let store = Self::from_connection(
            Connection::open(path),
            &path.display().to_string(),
            rules,
            recorder,
        )?;
        store
            .db()
            .busy_timeout(Duration::from_secs(5))
            .map_err(|source| StoreError {
                location: path.display().to_string(),
                source,
            })?;
        Ok(store)
    }

    fn from_connection(
        connection: rusqlite::Result<Connection>,
        location: &str,
        rules: StoreRules,
        recorder: Option<Arc<Recorder>>,
    ) -> Result<Self, StoreError> {
        let error = |source| StoreError {
            location: location.to_string(),
            source,
        };
        let connection = connection.map_err(error)?;
        connection.execute_batch(SCHEMA).map_err(error)?;
        Ok(SqliteStore {
            connection: Mutex::new(connection),
            rules,
            recorder,
            cache: Mutex::new(BTreeMap::new()),
        })
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn cache_lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, CacheEntry>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies the write, comparing the fence as `compare` says; returns the store order of an
    /// applied write or the fence that rejected it.
    fn write_now(
        &self,
        key: &str,
        token: FencingToken,
        write_id: &str,
        value: &str,
        compare: Compare,
    ) -> rusqlite::Result<Result<u64, FencingToken>> {
        let mut db = self.db();
        let tx = db.transaction()?;
        tx.prepare_cached("INSERT OR IGNORE INTO register (key, fence) VALUES (?1, 0)")?
            .execute(params![key])?;
        let update = match compare {
            Compare::Number => {
                "UPDATE register SET fence = ?2, write_id = ?3, value = ?4 \
                 WHERE key = ?1 AND fence <= ?2"
            }
            Compare::Text => {
                "UPDATE register SET fence = ?2, write_id = ?3, value = ?4 \
                 WHERE key = ?1 AND CAST(fence AS TEXT) <= CAST(?2 AS TEXT)"
            }
            Compare::Nothing => {
                "UPDATE register SET fence = ?2, write_id = ?3, value = ?4 WHERE key = ?1"
            }
        };
        let changed =
            tx.prepare_cached(update)?
                .execute(params![key, token as i64, write_id, value])?;
        let outcome = if changed == 1 {
            tx.prepare_cached("INSERT INTO applied (key, fence, write_id) VALUES (?1, ?2, ?3)")?
                .execute(params![key, token as i64, write_id])?;
            Ok(tx.last_insert_rowid() as u64)
        } else {
            let current: i64 = tx
                .prepare_cached("SELECT fence FROM register WHERE key = ?1")?
                .query_row(params![key], |row| row.get(0))?;
            Err(current as FencingToken)
        };
        tx.commit()?;
        Ok(outcome)
    }

    fn current_fence(&self, key: &str) -> rusqlite::Result<FencingToken> {
        let fence: Option<i64> = self
            .db()
            .prepare_cached("SELECT fence FROM register WHERE key = ?1")?
            .query_row(params![key], |row| row.get(0))
            .optional()?;
        Ok(fence.unwrap_or(0) as FencingToken)
    }

    /// The key's value as the database holds it now.
    fn read_now(&self, key: &str) -> Result<ReadValue, CallError> {
        let row = self
            .db()
            .prepare_cached("SELECT fence, write_id, value FROM register WHERE key = ?1")
            .and_then(|mut statement| {
                statement
                    .query_row(params![key], |row| {
                        Ok(ReadValue {
                            fencing_token: row.get::<_, i64>(0)? as FencingToken,
                            write_id: row.get(1)?,
                            value: row.get(2)?,
                        })
                    })
                    .optional()
            })
            .map_err(not_applied)?;
        Ok(row.unwrap_or_default())
    }

    /// A read the store's cache answers, if it has one for `key`: [`StoreRules::PhantomRead`]
    /// answers from every entry, [`StoreRules::StaleCache`] from one filled less than its
    /// entry TTL ago.
    fn cached(&self, key: &str) -> Option<ReadValue> {
        let cache = self.cache_lock();
        let entry = cache.get(key)?;
        let fresh = match self.rules {
            StoreRules::PhantomRead => true,
            StoreRules::StaleCache { entry_ttl_ns } => {
                fencer_harness::time::now().duration_since(entry.filled_at)
                    < Duration::from_nanos(entry_ttl_ns)
            }
            _ => false,
        };
        fresh.then(|| entry.value.clone())
    }

    fn log_applied(&self, key: &str, token: FencingToken, write_id: &str, value: &str, seq: u64) {
        if let Some(recorder) = &self.recorder {
            recorder.record_view(&EventView {
                key: Some(key),
                token: Some(token),
                write_id: Some(write_id),
                value: Some(value),
                seq: Some(seq),
                ..EventView::new("store", EventType::Log, Op::Write)
            });
        }
    }
}

/// How a write's `UPDATE` compares the stored fence with the write's token.
#[derive(Clone, Copy)]
enum Compare {
    /// `fence <= token`, as numbers: the fenced write.
    Number,
    /// `fence <= token`, as text ([`StoreRules::RefusesNewer`]).
    Text,
    /// No comparison: the write always applies.
    Nothing,
}

/// A database error inside a call: the transaction rolled back, so nothing was applied.
fn not_applied(error: rusqlite::Error) -> CallError {
    CallError::NotApplied(format!("sqlite: {error}"))
}

#[async_trait]
impl FencedStore for SqliteStore {
    async fn write(
        &self,
        key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        let compare = match self.rules {
            StoreRules::Fenced | StoreRules::StaleCache { .. } | StoreRules::IgnoresRowcount => {
                Compare::Number
            }
            StoreRules::Unfenced => Compare::Nothing,
            StoreRules::CheckThenWrite { check_gap_ns } => {
                let current = self.current_fence(key).map_err(not_applied)?;
                if fencing_token < current {
                    return Ok(Written::Rejected {
                        current_token: current,
                    });
                }
                fencer_harness::time::sleep(Duration::from_nanos(check_gap_ns)).await;
                Compare::Nothing
            }
            StoreRules::RefusesNewer => Compare::Text,
            StoreRules::PhantomRead => {
                self.cache_lock().insert(
                    key.to_string(),
                    CacheEntry {
                        value: ReadValue {
                            fencing_token,
                            write_id: Some(write_id.to_string()),
                            value: Some(value.to_string()),
                        },
                        filled_at: fencer_harness::time::now(),
                    },
                );
                Compare::Number
            }
        };
        match self
            .write_now(key, fencing_token, write_id, value, compare)
            .map_err(not_applied)?
        {
            Ok(seq) => {
                self.log_applied(key, fencing_token, write_id, value, seq);
                Ok(Written::Applied)
            }
            Err(_) if self.rules == StoreRules::IgnoresRowcount => Ok(Written::Applied),
            Err(current_token) => Ok(Written::Rejected { current_token }),
        }
    }

    async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        if let Some(cached) = self.cached(key) {
            return Ok(cached);
        }
        let read = self.read_now(key)?;
        if let StoreRules::StaleCache { .. } = self.rules {
            self.cache_lock().insert(
                key.to_string(),
                CacheEntry {
                    value: read.clone(),
                    filled_at: fencer_harness::time::now(),
                },
            );
        }
        Ok(read)
    }

    async fn applied_log(&self) -> Option<Vec<AppliedWrite>> {
        let db = self.db();
        let mut statement = db
            .prepare("SELECT seq, key, fence, write_id FROM applied ORDER BY seq")
            .ok()?;
        let rows = statement
            .query_map([], |row| {
                Ok(AppliedWrite {
                    seq: row.get::<_, i64>(0)? as u64,
                    key: row.get(1)?,
                    fencing_token: row.get::<_, i64>(2)? as FencingToken,
                    write_id: row.get(3)?,
                })
            })
            .ok()?;
        rows.collect::<rusqlite::Result<Vec<_>>>().ok()
    }

    /// The fence is compared in SQL; nothing here reads `tokio::time`.
    fn reads_tokio_time(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::runtime::simulation_runtime;

    fn run<T>(body: impl std::future::Future<Output = T>) -> T {
        simulation_runtime().block_on(body)
    }

    #[test]
    fn fenced_store_rejects_late_write_after_newer_generation() {
        run(async {
            let store = SqliteStore::in_memory(StoreRules::Fenced, None).unwrap();
            assert_eq!(
                store.write("k", 2, "b", "B result").await,
                Ok(Written::Applied)
            );
            assert_eq!(
                store.write("k", 1, "a", "late A result").await,
                Ok(Written::Rejected { current_token: 2 })
            );
            let read = store.read("k").await.unwrap();
            assert_eq!(read.value.as_deref(), Some("B result"));
            assert_eq!(read.fencing_token, 2);
        });
    }

    #[test]
    fn fenced_store_allows_same_generation_writes() {
        run(async {
            let store = SqliteStore::in_memory(StoreRules::Fenced, None).unwrap();
            assert_eq!(store.write("k", 3, "x", "1").await, Ok(Written::Applied));
            assert_eq!(store.write("k", 3, "y", "2").await, Ok(Written::Applied));
            let log = store.applied_log().await.unwrap();
            assert_eq!(log.len(), 2);
            assert_eq!((log[1].seq, log[1].write_id.as_str()), (2, "y"));
        });
    }

    #[test]
    fn unfenced_store_accepts_the_late_write() {
        run(async {
            let store = SqliteStore::in_memory(StoreRules::Unfenced, None).unwrap();
            store.write("k", 2, "b", "B result").await.unwrap();
            assert_eq!(
                store.write("k", 1, "a", "late A result").await,
                Ok(Written::Applied)
            );
            let read = store.read("k").await.unwrap();
            assert_eq!(read.value.as_deref(), Some("late A result"));
        });
    }

    #[test]
    fn check_then_write_loses_a_race_the_fenced_store_wins() {
        for (rules, expected_value) in [
            (StoreRules::Fenced, "B result"),
            (
                StoreRules::CheckThenWrite {
                    check_gap_ns: 1_000_000,
                },
                "late A result",
            ),
        ] {
            let value = run(async move {
                let store = Arc::new(SqliteStore::in_memory(rules, None).unwrap());
                store.write("k", 1, "a0", "A result").await.unwrap();
                let late = {
                    let store = Arc::clone(&store);
                    fencer_harness::task::spawn(async move {
                        store.write("k", 1, "a1", "late A result").await
                    })
                };
                // B checks first; A's check, before B has written, passes too.
                store.write("k", 2, "b", "B result").await.unwrap();
                late.await.unwrap().unwrap();
                store.read("k").await.unwrap().value.unwrap()
            });
            assert_eq!(value, expected_value, "{rules:?}");
        }
    }

    #[test]
    fn refuses_newer_compares_fences_as_text() {
        run(async {
            for (rules, ten) in [
                (StoreRules::Fenced, Ok(Written::Applied)),
                (
                    StoreRules::RefusesNewer,
                    Ok(Written::Rejected { current_token: 9 }),
                ),
            ] {
                let store = SqliteStore::in_memory(rules, None).unwrap();
                assert_eq!(store.write("k", 9, "a", "9").await, Ok(Written::Applied));
                assert_eq!(store.write("k", 10, "b", "10").await, ten, "{rules:?}");
            }
            // As text, "9" <= "90" and "90" > "100".
            let store = SqliteStore::in_memory(StoreRules::RefusesNewer, None).unwrap();
            store.write("k", 9, "a", "9").await.unwrap();
            assert_eq!(store.write("k", 90, "c", "90").await, Ok(Written::Applied));
            assert_eq!(
                store.write("k", 100, "d", "100").await,
                Ok(Written::Rejected { current_token: 90 })
            );
        });
    }

    #[test]
    fn phantom_read_serves_a_refused_write_from_its_cache() {
        run(async {
            let store = SqliteStore::in_memory(StoreRules::PhantomRead, None).unwrap();
            store.write("k", 2, "b", "B result").await.unwrap();
            assert_eq!(
                store.write("k", 1, "a", "late A result").await,
                Ok(Written::Rejected { current_token: 2 })
            );
            let read = store.read("k").await.unwrap();
            assert_eq!(
                (read.fencing_token, read.value.as_deref()),
                (1, Some("late A result"))
            );
            let applied = store.applied_log().await.unwrap();
            assert_eq!(applied.len(), 1, "the database refused it");
            assert_eq!(applied[0].write_id, "b");
        });
    }

    #[test]
    fn stale_cache_serves_the_value_of_its_fill_until_the_entry_expires() {
        run(async {
            let rules = StoreRules::StaleCache {
                entry_ttl_ns: 1_000_000_000,
            };
            let store = SqliteStore::in_memory(rules, None).unwrap();
            store.write("k", 1, "a", "A result").await.unwrap();
            assert_eq!(
                store.read("k").await.unwrap().write_id.as_deref(),
                Some("a")
            );
            assert_eq!(
                store.write("k", 2, "b", "B result").await,
                Ok(Written::Applied)
            );
            fencer_harness::time::sleep(Duration::from_millis(999)).await;
            let cached = store.read("k").await.unwrap();
            assert_eq!(
                (cached.fencing_token, cached.write_id.as_deref()),
                (1, Some("a"))
            );
            fencer_harness::time::sleep(Duration::from_millis(1)).await;
            let fresh = store.read("k").await.unwrap();
            assert_eq!(
                (fresh.fencing_token, fresh.write_id.as_deref()),
                (2, Some("b"))
            );
        });
    }

    #[test]
    fn ignoring_the_rowcount_answers_applied_for_a_write_the_fence_refused() {
        run(async {
            let store = SqliteStore::in_memory(StoreRules::IgnoresRowcount, None).unwrap();
            store.write("k", 2, "b", "B result").await.unwrap();
            assert_eq!(
                store.write("k", 1, "a", "late A result").await,
                Ok(Written::Applied)
            );
            let read = store.read("k").await.unwrap();
            assert_eq!(
                (read.fencing_token, read.write_id.as_deref()),
                (2, Some("b"))
            );
            let applied = store.applied_log().await.unwrap();
            assert_eq!(applied.len(), 1, "the database refused it");
        });
    }

    #[test]
    fn reading_an_unwritten_key_gives_fence_zero() {
        run(async {
            let store = SqliteStore::in_memory(StoreRules::Fenced, None).unwrap();
            assert_eq!(store.read("nothing").await, Ok(ReadValue::default()));
        });
    }

    #[test]
    fn file_store_is_shared_between_connections() {
        let dir = std::env::temp_dir().join(format!("fencer-store-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("store.db");
        let _ = std::fs::remove_file(&path);
        run(async {
            let first = SqliteStore::open(&path, StoreRules::Fenced, None).unwrap();
            let second = SqliteStore::open(&path, StoreRules::Fenced, None).unwrap();
            first.write("k", 5, "w", "v").await.unwrap();
            assert_eq!(
                second.write("k", 4, "old", "x").await,
                Ok(Written::Rejected { current_token: 5 })
            );
        });
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
