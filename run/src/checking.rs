//! Which checks a run's settings call for: the checkers of its workload, strict or not, so
//! `run`, `replay`, the gate and a user's `cargo test` judge the same history the same way.

use fencer_checkers::{CheckOptions, Verdict, check_packed};
use fencer_harness::PackedHistory;

use crate::settings::Settings;

/// The check options for a run with `settings`; `strict` makes warnings fail the verdict.
pub fn check_options(settings: &Settings, strict: bool) -> CheckOptions {
    CheckOptions {
        workload: settings.workload,
        strict,
        ..CheckOptions::default()
    }
}

/// Judges a history recorded under `settings` with its workload's checkers; `strict` makes
/// warnings fail the verdict. It takes the checking form the recorder keeps, so judging a run
/// packs nothing again.
pub fn judge(settings: &Settings, history: &PackedHistory, strict: bool) -> Verdict {
    check_packed(history, &check_options(settings, strict))
}

#[cfg(test)]
mod tests {
    use fencer_harness::Workload;

    use super::*;

    #[test]
    fn the_workload_of_the_settings_picks_the_checkers() {
        let settings = Settings {
            workload: Workload::LockCounter,
            ..Settings::default()
        };
        let options = check_options(&settings, true);
        assert_eq!(options.workload, Workload::LockCounter);
        assert!(options.strict);
        assert!(!check_options(&settings, false).strict);
    }
}
