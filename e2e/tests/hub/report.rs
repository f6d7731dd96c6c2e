//! What a test found: its failures, all reported at its end (not only the first), with the
//! numbers worth keeping and what each ferro-ipam logged.

use crate::fleet::Fleet;

/// Lines of each ferro-ipam's log a failure shows (warnings and errors, then its end).
const LOG_LINES: usize = 40;
/// Lines of one failure shown at most (the checker may find a thousand pending claims).
const FAILURE_LINES: usize = 25;

pub struct Report {
    test: &'static str,
    failures: Vec<String>,
    notes: Vec<String>,
}

impl Report {
    pub fn new(test: &'static str) -> Report {
        Report { test, failures: Vec::new(), notes: Vec::new() }
    }

    pub fn fail(&mut self, failure: impl Into<String>) {
        let failure = failure.into();
        eprintln!("[{}] FAILED: {}", self.test, shorten(&failure, 5));
        self.failures.push(failure);
    }

    pub fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        eprintln!("[{}] {note}", self.test);
        self.notes.push(note);
    }

    /// Panics with every failure and the providers' logs, if any failed.
    pub fn conclude(self, fleet: &Fleet) {
        self.conclude_with(|lines| fleet.logs(lines));
    }

    /// Panics with every failure and what `logs` gives (the providers' logs, so many lines
    /// each), if any failed.
    pub fn conclude_with(self, logs: impl FnOnce(usize) -> String) {
        if self.failures.is_empty() {
            return;
        }
        let failures: Vec<String> = self.failures.iter().map(|f| format!("- {}", shorten(f, FAILURE_LINES))).collect();
        panic!(
            "{}: {} failure(s):\n{}\n\nnotes:\n{}\n{}",
            self.test,
            failures.len(),
            failures.join("\n"),
            self.notes.join("\n"),
            logs(LOG_LINES)
        );
    }
}

/// At most `lines` lines of `text`, and how many were left out.
pub fn shorten(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    if all.len() <= lines {
        return text.to_owned();
    }
    format!("{}\n  ... and {} more lines", all[..lines].join("\n"), all.len() - lines)
}
