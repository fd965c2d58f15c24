//! Progress of a gate: an indicatif bar on a terminal, plain lines in CI logs (no TTY, or
//! `CI=true`), where a redrawn bar would be noise.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::output::{errln, outln};

/// Plain progress lines per batch when the total is known (every 10 %).
const PLAIN_LINES: usize = 10;
/// Seeds between two plain lines when the total is not known (`--time`).
const PLAIN_EVERY_SEEDS: usize = 100;

/// Reports how far a batch is.
pub struct Progress {
    bar: Option<ProgressBar>,
    what: &'static str,
    total: Option<usize>,
    done: usize,
    failing: usize,
    printed_at: usize,
    started: Instant,
}

impl Progress {
    /// Starts reporting a batch of `total` runs (`None`: bounded by time only).
    pub fn new(what: &'static str, total: Option<usize>) -> Progress {
        let plain =
            !std::io::stderr().is_terminal() || std::env::var("CI").is_ok_and(|ci| ci == "true");
        let bar = (!plain).then(|| {
            let bar = match total {
                Some(total) => ProgressBar::new(total as u64),
                None => ProgressBar::new_spinner(),
            };
            let template = match total {
                Some(_) => "{prefix} [{bar:30}] {pos}/{len} {msg} ({per_sec}, eta {eta})",
                None => "{prefix} {spinner} {pos} {msg} ({per_sec})",
            };
            bar.set_style(
                ProgressStyle::with_template(template)
                    .expect("the template is valid")
                    .progress_chars("=> "),
            );
            bar.set_prefix(what);
            bar.set_message("0 failing");
            bar
        });
        Progress {
            bar,
            what,
            total,
            done: 0,
            failing: 0,
            printed_at: 0,
            started: Instant::now(),
        }
    }

    /// One more run finished.
    pub fn advance(&mut self, failed: bool) {
        self.done += 1;
        self.failing += usize::from(failed);
        if let Some(bar) = &self.bar {
            bar.inc(1);
            bar.set_message(format!("{} failing", self.failing));
            return;
        }
        let every = match self.total {
            Some(total) => total.div_ceil(PLAIN_LINES).max(1),
            None => PLAIN_EVERY_SEEDS,
        };
        if self.done.is_multiple_of(every) {
            self.plain_line();
        }
    }

    fn plain_line(&mut self) {
        self.printed_at = self.done;
        let rate = self.done as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        let of = self
            .total
            .map_or(String::new(), |total| format!("/{total}"));
        errln!(
            "{}: {}{of} done, {} failing, {rate:.1} runs/s",
            self.what,
            self.done,
            self.failing
        );
    }

    /// Prints a result line (a failure): above the bar on a terminal, on stdout in plain mode
    /// (where progress lines go to stderr).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => outln!("{line}"),
        }
    }

    /// Ends the report: the bar is cleared; plain mode prints a last line unless the last one
    /// is current.
    pub fn finish(mut self) {
        match self.bar.take() {
            Some(bar) => bar.finish_and_clear(),
            None => {
                if self.done > self.printed_at {
                    self.plain_line();
                }
            }
        }
    }
}
