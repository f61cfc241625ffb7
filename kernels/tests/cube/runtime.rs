//! What our vendored cubecl-runtime adds (vendor/README.md), on a real wgpu device: several
//! buffers' resources in one round trip to the runner, each the one `get_resource` gives alone.

use burn::backend::wgpu::{WgpuDevice, WgpuRuntime};
use cubecl::Runtime;

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
