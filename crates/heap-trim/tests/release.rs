//! `release` gives back pages the allocator kept. Alone in its test binary: resident memory is
//! the process's, and another test allocating beside it would blur the figure.

/// Resident memory of this process, in bytes (`/proc/self/statm`, second field, in pages).
fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = statm.split_whitespace().nth(1).and_then(|f| f.parse().ok()).expect("resident pages");
    pages * 4096
}

#[test]
fn free_pages_between_live_blocks_go_back_to_the_kernel() {
    if !heap_trim::SUPPORTED {
        assert!(!heap_trim::release(), "an unsupported platform returns nothing");
        return;
    }
    const MIB: usize = 1024 * 1024;
    // 64 MiB in blocks small enough to come from the heap rather than mmap, touched so that
    // they are resident, and one block after them, so that freeing them leaves a hole below a
    // live block: glibc keeps such a hole resident until it is trimmed.
    let mut blocks: Vec<Vec<u8>> = (0..64 * 16).map(|_| vec![1u8; 64 * 1024 - 64]).collect();
    let fence = vec![1u8; 1024];
    let before_free = resident();
    blocks.clear();
    blocks.shrink_to_fit();
    let kept = resident();
    assert!(
        kept + 16 * MIB > before_free,
        "the allocator kept the freed blocks resident ({kept} of {before_free} bytes)"
    );

    assert!(heap_trim::release(), "malloc_trim returned nothing");
    let after = resident();
    assert!(after + 48 * MIB < kept, "resident memory went from {kept} to only {after} bytes");
    drop(fence);
}
