//! Our sampler hands out frames in LeRobot's order: the orders LeRobot 0.6.1's own
//! `EpisodeAwareSampler` yielded over three epochs, for the episodes of the `pusht_mini` fixture
//! (`tests/fixtures/lerobot_sampler/make_fixture.py`), with drops, episode subsets (one unsorted,
//! with a repeat) and several seeds.

use loader::{EpisodeSampler, SamplerConfig};
use serde_json::Value;

#[test]
fn every_epoch_is_lerobots_order_frame_for_frame() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot_sampler/orders.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let episodes: Vec<std::ops::Range<usize>> = fixture["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[0].as_u64().unwrap() as usize..e[1].as_u64().unwrap() as usize)
        .collect();
    let cases = fixture["cases"].as_object().unwrap();
    assert_eq!(cases.len(), 4);
    for (name, case) in cases {
        let c = &case["config"];
        let int = |key: &str| c[key].as_u64().unwrap_or(0) as usize;
        let config = SamplerConfig {
            seed: c["seed"].as_u64().unwrap(),
            drop_n_first_frames: int("drop_n_first_frames"),
            drop_n_last_frames: int("drop_n_last_frames"),
            episodes: c.get("episode_indices_to_use").map(|e| serde_json::from_value(e.clone()).unwrap()),
            ..SamplerConfig::default()
        };
        let sampler = EpisodeSampler::new(config, &episodes).unwrap();
        let epochs = case["epochs"].as_array().unwrap();
        assert_eq!(epochs.len(), 3);
        for (epoch, theirs) in epochs.iter().enumerate() {
            let theirs: Vec<usize> = serde_json::from_value(theirs.clone()).unwrap();
            assert_eq!(sampler.epoch_order(epoch as u64), theirs, "{name}, epoch {epoch}");
        }
    }
}
