//! Copies of buffers too large to stay in the CPU's caches, written with non-temporal stores.
//!
//! An ordinary copy reads each destination line into the cache before it writes it (the read
//! for ownership) and then evicts it to memory: three transfers for every byte copied. A
//! non-temporal store writes the line to memory without reading it, so a copy moves two. When
//! the copy is larger than the last-level cache, and nothing reads the destination again soon
//! (a batch of camera frames that waits in the prefetch queue, a page-locked buffer that only
//! the GPU's DMA reads), that is the whole difference: on a 2-core AMD EPYC VM, 512 KiB pieces
//! copy at 10.9-11.3 GB/s on one thread and 22.5-22.7 on two with `copy_from_slice`, at
//! 14.4-15.6 and 27.4-29.8 this way (`bench loader`'s header; bench/RESULTS.md, "Large batches'
//! frames copied past the caches").
//!
//! On x86-64 the stores are SSE2's `movntdq`, part of every x86-64 CPU; elsewhere the copy is
//! `copy_from_slice`.

/// Copies `src` into `dst` past the caches where the CPU can ([`copy_from_slice`]'s result,
/// a panic when the lengths differ). The stores are fenced before it returns, so another
/// thread that is handed `dst` afterwards (through a channel, a lock, rayon's join) sees them.
///
/// [`copy_from_slice`]: slice::copy_from_slice
pub fn copy_past_caches(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "a bulk copy's source and destination differ in length");
    #[cfg(target_arch = "x86_64")]
    sse2::copy(dst, src);
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    #![expect(unsafe_code, reason = "SSE2's loads and streaming stores take raw pointers")]

    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};

    /// The bytes of one streaming store.
    const LANE: usize = 16;
    /// The bytes of one loop turn: a cache line, four stores.
    const LINE: usize = 64;

    /// `dst` (as long as `src`) written from `src`: the bytes before its first cache line and
    /// after its last whole one by `copy_from_slice`, the whole lines between by streaming
    /// stores, then a fence.
    pub(super) fn copy(dst: &mut [u8], src: &[u8]) {
        let head = dst.as_ptr().align_offset(LINE).min(dst.len());
        let (dst_head, dst) = dst.split_at_mut(head);
        let (src_head, src) = src.split_at(head);
        dst_head.copy_from_slice(src_head);
        let middle = dst.len() / LINE * LINE;
        let (dst_middle, dst_tail) = dst.split_at_mut(middle);
        let (src_middle, src_tail) = src.split_at(middle);
        for (to, from) in dst_middle.chunks_exact_mut(LINE).zip(src_middle.chunks_exact(LINE)) {
            let (to, from) = (to.as_mut_ptr().cast::<__m128i>(), from.as_ptr().cast::<__m128i>());
            for k in 0..LINE / LANE {
                // SAFETY: `to` and `from` are 64 bytes each (`chunks_exact`), so lanes 0-3 are
                // inside them; `to` is a cache line, 64-byte aligned (the head was split off at
                // that alignment and every chunk is 64 bytes), where the store needs 16; the
                // load takes any alignment; SSE2 is part of x86-64.
                unsafe { _mm_stream_si128(to.add(k), _mm_loadu_si128(from.add(k))) };
            }
        }
        dst_tail.copy_from_slice(src_tail);
        // Streaming stores are weakly ordered: fenced here, they are visible before any
        // later store of this thread (the one that hands `dst` on).
        // SAFETY: SSE is part of x86-64; the fence has no other requirement.
        unsafe { _mm_sfence() };
    }
}

#[cfg(test)]
mod tests {
    use super::copy_past_caches;

    /// Every length up to a few lines, from every alignment of either side, and one large
    /// copy: the bytes `copy_from_slice` gives, the rest of the destination untouched.
    #[test]
    fn copies_what_copy_from_slice_copies() {
        let source: Vec<u8> = (0..(1usize << 20) + 300).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut lengths: Vec<usize> = (0..=260).collect();
        lengths.push(1 << 20);
        for len in lengths {
            for (from, to) in [(0, 0), (1, 0), (0, 1), (3, 17), (15, 15), (16, 5), (33, 48), (7, 63)] {
                let mut ours = vec![0xAB_u8; len + 64];
                let mut theirs = ours.clone();
                copy_past_caches(&mut ours[to..to + len], &source[from..from + len]);
                theirs[to..to + len].copy_from_slice(&source[from..from + len]);
                assert!(ours == theirs, "{len} bytes from offset {from} to offset {to}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "differ in length")]
    fn refuses_slices_of_different_lengths() {
        copy_past_caches(&mut [0; 4], &[1; 5]);
    }
}
