//! What our vendored cubecl-runtime adds (vendor/README.md): several buffers' resources in one
//! round trip to the runner, a closure run on the server, on a real wgpu device; and a graph
//! capture's memory (upstream cubecl's #1415 and #1469, backported), on the host's memory.

use std::sync::Arc;

use burn::backend::wgpu::{WgpuDevice, WgpuRuntime};
use cubecl::Runtime;
use cubecl::ir::MemoryDeviceProperties;
use cubecl::server::ComputeServer;
use cubecl_runtime::logging::ServerLogger;
use cubecl_runtime::memory_management::{
    ManagedMemoryHandle, MemoryAllocationMode, MemoryConfiguration, MemoryManagement, MemoryManagementOptions,
};
use cubecl_runtime::storage::BytesStorage;

#[test]
fn several_buffers_resources_in_one_round_trip_are_each_ones_own() {
    let client = WgpuRuntime::client(&WgpuDevice::default());
    let handles: Vec<_> = [16, 4096, 1 << 20, 16].into_iter().map(|bytes| client.empty(bytes)).collect();
    let together = client.get_resources(handles.clone()).unwrap();
    assert_eq!(together.len(), handles.len());
    for (handle, resource) in handles.into_iter().zip(&together) {
        let alone = client.get_resource(handle).unwrap();
        let (a, b) = (resource.resource(), alone.resource());
        assert!(
            a.buffer == b.buffer && a.offset == b.offset && a.size == b.size,
            "another buffer, or another slice of it"
        );
    }
}

#[test]
fn a_closure_run_on_the_server_reads_what_the_server_holds() {
    let client = WgpuRuntime::client(&WgpuDevice::default());
    let handle = client.empty(4096);
    let binding = handle.clone().binding();
    let (offset, size) = client.with_server(move |server, stream| {
        let resource = server.get_resource(binding, stream).expect("the buffer is the server's");
        (resource.resource().offset, resource.resource().size)
    });
    let alone = client.get_resource(handle).unwrap();
    assert_eq!((offset, size), (alone.resource().offset, alone.resource().size));
}

/// A memory manager over the host's memory, whose pools take whole pages (as the tests of
/// upstream's capture do).
fn memory() -> MemoryManagement<BytesStorage> {
    let properties = MemoryDeviceProperties { max_page_size: 128 << 20, alignment: 32 };
    MemoryManagement::from_configuration(
        BytesStorage::default(),
        &properties,
        MemoryConfiguration::ExclusivePages,
        Arc::new(ServerLogger::default()),
        MemoryManagementOptions::new("capture"),
    )
}

/// `count` slices of `bytes` reserved at once, for a window to hold.
fn reserved(memory: &mut MemoryManagement<BytesStorage>, count: usize, bytes: u64) -> Vec<ManagedMemoryHandle> {
    (0..count).map(|_| memory.reserve(bytes).expect("reserved")).collect()
}

#[test]
fn a_capture_holds_exactly_the_slices_its_recording_was_handed() {
    let mut memory = memory();
    // Alive before the capture (a weight, an input) and through it: not the graph's.
    memory.capture_begin();
    let before = memory.reserve(1024).unwrap();
    drop(memory.capture_end());
    // An idle free slice of another size, left by an earlier capture.
    memory.capture_begin();
    drop(memory.reserve(4096).unwrap());
    drop(memory.capture_end());

    memory.capture_begin();
    drop(memory.reserve(2048).unwrap()); // the warm-up
    memory.capture_priming_end();
    drop(memory.reserve(2048).unwrap()); // the recording, on the warm-up's slice
    assert_eq!(memory.capture_recorded_allocations(), Some(0));
    let held = memory.capture_end();
    assert_eq!(held.len(), 1, "the recording's one slice, neither the live buffer nor the idle one");
    assert!(before.can_mut(), "a buffer alive before the capture keeps its in-place writes");
    // While the graph holds it, its slice goes to no one else.
    let reserved_before = memory.memory_usage().bytes_reserved;
    let _other = memory.reserve(2048).unwrap();
    assert!(memory.memory_usage().bytes_reserved > reserved_before, "a held slice was handed out again");
}

#[test]
fn a_tensors_slice_is_held_under_the_handle_it_was_bound_to() {
    let mut memory = memory();
    memory.capture_begin();
    drop(memory.reserve(1024).unwrap());
    memory.capture_priming_end();
    // As a tensor's buffer is made: a slice reserved, then bound to the handle the client made.
    let reserved = memory.reserve(1024).unwrap();
    let assigned = ManagedMemoryHandle::new();
    memory.bind(reserved, assigned.clone(), 0).expect("bound");
    drop(assigned);
    assert_eq!(memory.capture_end().len(), 1, "the bound slice was not held");
}

#[test]
fn a_slice_freed_and_reused_within_the_recording_is_held() {
    let mut memory = memory();
    memory.capture_begin();
    let live = memory.reserve(1024).unwrap();
    drop(memory.capture_end());
    // Alive when the recording begins, freed in it, its slice handed to what the graph records.
    memory.capture_begin();
    memory.capture_priming_end();
    drop(live);
    drop(memory.reserve(1024).unwrap());
    assert_eq!(memory.capture_recorded_allocations(), Some(0));
    assert_eq!(memory.capture_end().len(), 1);
}

#[test]
fn priming_grows_the_pool_to_the_warm_ups_working_set_not_its_peak() {
    let mut memory = memory();
    memory.capture_begin();
    // The warm-up holds one slice at a time (its peak), three in all (its working set).
    for _ in 0..3 {
        drop(memory.reserve(1024).unwrap());
    }
    memory.capture_priming_end();
    let after_warm_up = memory.memory_usage().bytes_reserved;
    // The recorded run holds all three at once, from the pool.
    let recorded = reserved(&mut memory, 3, 1024);
    assert_eq!(memory.memory_usage().bytes_reserved, after_warm_up, "the recorded run allocated");
    assert_eq!(memory.capture_recorded_allocations(), Some(0));
    drop(recorded);
    drop(memory.capture_end());
}

#[test]
fn a_page_allocated_while_recording_is_counted_and_never_handed_out_again() {
    let mut memory = memory();
    memory.capture_begin();
    drop(memory.reserve(1024).unwrap());
    memory.capture_priming_end();
    // One slice the warm-up left, two the recorded run asks for at once: one page more, whose
    // address belongs to the graph the capture refuses.
    let recorded = reserved(&mut memory, 2, 1024);
    assert_eq!(memory.capture_recorded_allocations(), Some(1));
    drop(recorded);
    drop(memory.capture_end());
    assert_eq!(memory.capture_recorded_allocations(), None, "outside a capture");
    // The warm-up's slice is free again; the recorded page is not, ever.
    let first = memory.reserve(1024).unwrap();
    let reserved_before = memory.memory_usage().bytes_reserved;
    let _second = memory.reserve(1024).unwrap();
    assert!(memory.memory_usage().bytes_reserved > reserved_before, "a recorded page was handed out");
    drop(first);
}

#[test]
fn the_warm_ups_slices_are_free_once_the_capture_ends_without_priming_ending() {
    let mut memory = memory();
    memory.capture_begin();
    drop(memory.reserve(1024).unwrap());
    assert!(memory.memory_usage().bytes_in_use > 0, "priming holds the dropped slice");
    drop(memory.capture_end());
    assert_eq!(memory.memory_usage().bytes_in_use, 0, "the primed slices outlived the capture");
}

#[test]
fn a_cleanup_a_mode_or_a_second_begin_during_a_capture_waits_for_its_end() {
    let mut memory = memory();
    memory.capture_begin();
    drop(memory.reserve(1024).unwrap());
    memory.capture_priming_end();
    // An explicit cleanup would deallocate the warm-up's free slice, the one the recorded run
    // reuses.
    memory.cleanup(true);
    drop(memory.reserve(1024).unwrap());
    assert_eq!(memory.capture_recorded_allocations(), Some(0), "the cleanup freed the warm-up's slice");
    assert_eq!(memory.capture_end().len(), 1);

    // A mode asked for during a capture would send its allocations to the dynamic pools.
    memory.capture_begin();
    memory.mode(MemoryAllocationMode::Auto);
    drop(memory.reserve(8192).unwrap());
    memory.capture_priming_end();
    drop(memory.reserve(8192).unwrap());
    assert_eq!(memory.capture_end().len(), 1, "the mode changed during the capture");

    // A second `capture_begin` keeps the first's record.
    memory.capture_begin();
    let first = memory.reserve(1024).unwrap();
    memory.capture_begin();
    let second = memory.reserve(16384).unwrap();
    drop((first, second));
    assert_eq!(memory.capture_end().len(), 2, "a second begin dropped the first's slices");
    assert!(memory.capture_end().is_empty(), "the capture ended once");
}
