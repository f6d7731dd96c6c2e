//! A process whose wall clock runs ahead of the server's: Debian's libfaketime, preloaded.
//!
//! Only the wall clock moves (`CLOCK_REALTIME`, what timestamps and leases are written with);
//! the monotonic clock stays true, as on a node whose NTP is off. The `faketime` wrapper
//! command is not used because it forks: the provider would not be its own pid, which the
//! tests signal and find in the Lease's holder identity.

use std::path::PathBuf;

use anyhow::{Result, bail};

/// Where Debian (and a source install) put the thread-safe library.
fn library() -> Result<PathBuf> {
    let arch = std::env::consts::ARCH;
    let candidates = [
        format!("/usr/lib/{arch}-linux-gnu/faketime/libfaketimeMT.so.1"),
        "/usr/lib/faketime/libfaketimeMT.so.1".to_owned(),
        "/usr/local/lib/faketime/libfaketimeMT.so.1".to_owned(),
    ];
    match candidates.iter().map(PathBuf::from).find(|p| p.exists()) {
        Some(path) => Ok(path),
        None => bail!(
            "libfaketime is not installed (looked for {}): run `make faketime` (Debian's faketime package)",
            candidates.join(", ")
        ),
    }
}

/// The environment that runs a process's wall clock `seconds` ahead.
pub fn ahead(seconds: i64) -> Result<Vec<(String, String)>> {
    Ok(vec![
        ("LD_PRELOAD".to_owned(), library()?.to_string_lossy().into_owned()),
        ("FAKETIME".to_owned(), format!("{seconds:+}s")),
        ("FAKETIME_DONT_FAKE_MONOTONIC".to_owned(), "1".to_owned()),
        // Read the offset on every call instead of caching it for 10 s.
        ("FAKETIME_NO_CACHE".to_owned(), "1".to_owned()),
    ])
}
