//! Printing that survives a reader going away: `fencer run | head -1` closes the pipe after one
//! line, and `println!` would panic on the next one, losing the run it was printing about.
//!
//! Everything the commands print goes through [`out!`] or [`outln!`] (stdout) or [`errln!`]
//! (stderr).
//! When a stream cannot take a line (the pipe is closed, the disk is full), that stream says
//! nothing more and the command carries on: a run still finishes and saves its directory, a
//! gate still writes its summary, and the exit code is the command's own, as if every line
//! had been read. Only a failure other than a closed pipe is mentioned, once, on stderr.

use std::fmt::Arguments;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout failed: nothing more is written to it.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);
/// Set once stderr failed: nothing more is written to it.
static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// `print!` that never panics: see the module documentation.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::out_text(format_args!($($arg)*), false)
    };
}

/// `println!` that never panics: see the module documentation.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::output::out_text(format_args!($($arg)*), true)
    };
}

/// `eprintln!` that never panics: see the module documentation.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::output::err_line(format_args!($($arg)*))
    };
}

pub(crate) use {errln, out, outln};

/// Writes `text` (and a newline, for a line) to stdout, unless stdout already failed.
pub(crate) fn out_text(text: Arguments<'_>, line: bool) {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    if let Err(error) = write_text(&mut io::stdout().lock(), text, line) {
        STDOUT_GONE.store(true, Ordering::Relaxed);
        if error.kind() != io::ErrorKind::BrokenPipe {
            err_line(format_args!(
                "warning: cannot write to stdout ({error}); printing stops here"
            ));
        }
    }
}

/// Writes one line to stderr, unless stderr already failed.
pub(crate) fn err_line(line: Arguments<'_>) {
    if STDERR_GONE.load(Ordering::Relaxed) {
        return;
    }
    if write_text(&mut io::stderr().lock(), line, true).is_err() {
        STDERR_GONE.store(true, Ordering::Relaxed);
    }
}

/// `text`, and a newline for a `line`, flushed (stdout buffers by line; a failure shows at
/// once).
fn write_text(out: &mut impl Write, text: Arguments<'_>, line: bool) -> io::Result<()> {
    out.write_fmt(text)?;
    if line {
        out.write_all(b"\n")?;
    }
    out.flush()
}
