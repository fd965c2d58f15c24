//! Which checks a run's settings call for: the checkers of its workload, strict or not, so
//! `run`, `replay` and a user's own harness judge the same history the same way.

use fencer_checkers::{CheckOptions, UnknownWorkload, Verdict, Workload, check_with};
use fencer_harness::History;

use crate::settings::Settings;

/// The check options for a run with `settings`; `strict` makes warnings fail the verdict.
pub fn check_options(settings: &Settings, strict: bool) -> Result<CheckOptions, UnknownWorkload> {
    Ok(CheckOptions {
        workload: settings.workload.parse::<Workload>()?,
        strict,
        ..CheckOptions::default()
    })
}

/// Judges a history recorded under `settings` (already validated, so its workload is known)
/// with its workload's checkers, non-strict: what `gate`, `mutants`, `shrink` and `bench` use.
pub fn judge(settings: &Settings, history: &History) -> Verdict {
    let options = check_options(settings, false).unwrap_or_default();
    check_with(history, &options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_of_the_settings_picks_the_checkers() {
        let mut settings = Settings {
            workload: "lock-counter".into(),
            ..Settings::default()
        };
        let options = check_options(&settings, true).unwrap();
        assert_eq!(options.workload, Workload::LockCounter);
        assert!(options.strict);
        settings.workload = "queue".into();
        assert!(check_options(&settings, false).is_err());
    }
}
