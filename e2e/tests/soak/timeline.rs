//! What happened when, in seconds since the soak began: faults begun and ended, pool edits,
//! what the checker saw. Printed (and written to `target/soak/`) at the end, so that a human can
//! read a failing run next to its seed.

use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Clone)]
pub struct Timeline {
    began: Instant,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Timeline {
    pub fn new() -> Timeline {
        Timeline { began: Instant::now(), lines: Arc::new(Mutex::new(Vec::new())) }
    }

    /// Seconds since the soak began.
    pub fn now(&self) -> f64 {
        self.began.elapsed().as_secs_f64()
    }

    /// Records a line (and prints it as it happens, for whoever watches a long run).
    pub fn note(&self, line: impl Into<String>) {
        let entry = format!("{:>8.2} s  {}", self.now(), line.into());
        eprintln!("[soak] {entry}");
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).push(entry);
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
