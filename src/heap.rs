//! The memory a listing leaves behind goes back to the kernel.
//!
//! A listing parses every claim and address page by page, and the claim review that follows it
//! looks at each claim once more: at 100,000 claims, hundreds of megabytes allocated and freed
//! within seconds. The allocator keeps those pages resident, so the process would be as large
//! as its busiest moment for the rest of its life. Once a listing has been reviewed they are
//! handed back (`heap-trim`: glibc's `malloc_trim`; nothing on other allocators).

use std::time::Instant;

/// Hands the heap's free pages back, on a blocking thread: the walk over every arena takes
/// milliseconds at 100,000 claims, which no reconcile should wait for.
pub fn release_after_listing() {
    tokio::task::spawn_blocking(|| {
        let started = Instant::now();
        let released = heap_trim::release();
        let took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::debug!(released, took_ms, "a listing reviewed: free heap pages handed back to the kernel");
    });
}
