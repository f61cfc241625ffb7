//! `trainer::memory::keep_freed_memory`: a training step's large buffers come from malloc's heap
//! and stay there when freed, instead of being mapped, unmapped and zeroed again every step.
//! One test in its own binary: the setting is process-wide.

#![allow(unsafe_code, reason = "malloc's statistics are read through a C call")]

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn large_buffers_stay_in_the_heap_once_freed_memory_is_kept() {
    // Over the 32 MiB up to which glibc raises its mapping threshold, under the 64 MiB of a
    // thread's heap (the test runs in a thread of its own).
    const SIZE: usize = 48 << 20;
    // SAFETY: mallinfo2 only reads malloc's statistics.
    let stats = || unsafe { libc::mallinfo2() };
    let allocate = || std::hint::black_box(vec![1u8; SIZE]);

    // glibc's default: a block this large gets a mapping of its own.
    let mapped_before = stats().hblkhd;
    let buffer = allocate();
    assert!(stats().hblkhd >= mapped_before + SIZE, "by default a 48 MiB block is mapped");
    drop(buffer);

    trainer::memory::keep_freed_memory();
    let mapped = stats().hblkhd;
    let buffer = allocate();
    assert_eq!(stats().hblkhd, mapped, "with freed memory kept, the block comes from the heap");
    assert!(stats().arena >= SIZE, "the heap holds the block");
    drop(buffer);
    let after = stats();
    assert!(after.arena >= SIZE && after.fordblks >= SIZE, "freeing it gives nothing back to the system");
}
