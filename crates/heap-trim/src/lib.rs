//! Hands the heap's free pages back to the kernel.
//!
//! glibc's allocator keeps memory a program has freed: it gives back only what lies at the top
//! of a heap, and keeps the free pages between live blocks resident for the next allocation.
//! After a burst of short-lived allocations (a listing of 100,000 objects, parsed page by page)
//! that can be a fifth of the process's resident memory, counted against its limit although
//! nothing uses it. `malloc_trim(0)` walks every arena and returns each whole free page to the
//! kernel (`MADV_DONTNEED`); the blocks stay the allocator's, the pages come back zeroed on use.
//!
//! The call is the only `unsafe` of ferro-ipam, which forbids it in its own crates: it lives
//! here, alone. Elsewhere than Linux with glibc (musl, whose allocator returns free pages by
//! itself, or other systems) [`release`] does nothing and says so.

/// Returns the heap's free pages to the kernel. True when some memory was returned; false when
/// there was none to return or the platform's allocator has no such call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release() -> bool {
    // SAFETY: `malloc_trim` takes no pointer and has no precondition; glibc locks each arena
    // while it trims it, so it may run beside allocations on other threads.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Returns the heap's free pages to the kernel: nothing to do with this platform's allocator.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release() -> bool {
    false
}

/// Whether [`release`] can return anything on this platform.
pub const SUPPORTED: bool = cfg!(all(target_os = "linux", target_env = "gnu"));
