//! The synthetic world: a pointer pushing a T-shaped block across a table, PushT-like, rendered
//! per camera. Deterministic per (seed, episode); smooth motion, so it compresses like footage.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::meta::features::FrameShape;

/// The side of the square world, in world units (PushT's 512).
pub const WORLD: f32 = 512.0;

/// One episode's trajectory.
#[derive(Debug, Clone)]
pub struct Trajectory {
    /// The pointer's position per frame.
    pub agent: Vec<[f32; 2]>,
    /// The position the pointer is steered to per frame (the action).
    pub target: Vec<[f32; 2]>,
    /// The block's centre and angle per frame.
    pub block: Vec<([f32; 2], f32)>,
    /// A reward in [0, 1] per frame (how close the block is to the goal).
    pub reward: Vec<f32>,
}

/// Simulates `len` frames of episode `episode` from `seed`.
pub fn simulate(seed: u64, episode: usize, len: usize) -> Trajectory {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(episode as u64);
    let mut agent = [rng.random_range(100.0..412.0), rng.random_range(100.0..412.0)];
    let mut block = (
        [rng.random_range(180.0..332.0), rng.random_range(180.0..332.0)],
        rng.random_range(0.0..std::f32::consts::TAU),
    );
    let goal = [256.0f32, 256.0];
    let mut waypoint = [rng.random_range(60.0..452.0), rng.random_range(60.0..452.0)];
    let mut out = Trajectory {
        agent: Vec::with_capacity(len),
        target: Vec::with_capacity(len),
        block: Vec::with_capacity(len),
        reward: Vec::with_capacity(len),
    };
    for _ in 0..len {
        if dist(agent, waypoint) < 12.0 || rng.random_bool(0.03) {
            waypoint = [rng.random_range(60.0..452.0), rng.random_range(60.0..452.0)];
        }
        let target = [
            (waypoint[0] + rng.random_range(-4.0..4.0)).clamp(0.0, WORLD),
            (waypoint[1] + rng.random_range(-4.0..4.0)).clamp(0.0, WORLD),
        ];
        out.agent.push(agent);
        out.target.push(target);
        out.block.push(block);
        out.reward.push((1.0 - dist(block.0, goal) / 256.0).clamp(0.0, 1.0));
        // The pointer moves part of the way to its target; the block is pushed when touched.
        let step = [(target[0] - agent[0]) * 0.25, (target[1] - agent[1]) * 0.25];
        agent = [agent[0] + step[0], agent[1] + step[1]];
        if dist(agent, block.0) < 40.0 {
            block.0 = [
                (block.0[0] + step[0] * 0.6).clamp(40.0, WORLD - 40.0),
                (block.0[1] + step[1] * 0.6).clamp(40.0, WORLD - 40.0),
            ];
            block.1 += 0.02 * (step[0] - step[1]).signum();
        }
    }
    out
}

fn dist(a: [f32; 2], b: [f32; 2]) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
}

/// Renders frame `t` of a trajectory as camera `camera` sees it, channel-first RGB, into
/// `out` (`3·H·W` bytes). Cameras differ in palette and in a mirrored or rotated view.
pub fn render(traj: &Trajectory, t: usize, camera: usize, shape: FrameShape, out: &mut [u8]) {
    let (h, w) = (shape.height, shape.width);
    let plane = h * w;
    let palette: [[u8; 3]; 3] = match camera % 3 {
        0 => [[240, 240, 236], [119, 136, 153], [65, 105, 225]],
        1 => [[228, 236, 242], [150, 110, 80], [220, 60, 60]],
        _ => [[236, 230, 240], [90, 150, 90], [240, 180, 30]],
    };
    let to_world = |x: usize, y: usize| -> [f32; 2] {
        let (u, v) = ((x as f32 + 0.5) / w as f32 * WORLD, (y as f32 + 0.5) / h as f32 * WORLD);
        match camera % 3 {
            0 => [u, v],
            1 => [WORLD - u, v],
            _ => [v, u],
        }
    };
    let (center, angle) = traj.block[t];
    let (sin, cos) = angle.sin_cos();
    let agent = traj.agent[t];
    for y in 0..h {
        for x in 0..w {
            let p = to_world(x, y);
            // Background with a soft vignette, so the encoder sees gradients like a real table.
            let shade = 1.0 - 0.08 * (((p[0] - 256.0).powi(2) + (p[1] - 256.0).powi(2)).sqrt() / 362.0);
            let mut rgb = palette[0].map(|c| (f32::from(c) * shade) as u8);
            // The goal outline.
            if (dist(p, [256.0, 256.0]) - 70.0).abs() < 2.5 {
                rgb = [120, 200, 120];
            }
            // The T block: a bar and a stem in the block's frame.
            let d = [p[0] - center[0], p[1] - center[1]];
            let (lx, ly) = (cos * d[0] + sin * d[1], -sin * d[0] + cos * d[1]);
            let in_bar = lx.abs() < 60.0 && (-30.0..-5.0).contains(&ly);
            let in_stem = lx.abs() < 12.5 && (-5.0..60.0).contains(&ly);
            if in_bar || in_stem {
                rgb = palette[1];
            }
            if dist(p, agent) < 15.0 {
                rgb = palette[2];
            }
            for c in 0..3 {
                out[c * plane + y * w + x] = rgb[c];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulation_is_deterministic_per_seed_and_episode() {
        let a = simulate(7, 3, 50);
        let b = simulate(7, 3, 50);
        let c = simulate(7, 4, 50);
        assert_eq!(a.agent, b.agent);
        assert_ne!(a.agent, c.agent);
        let shape = FrameShape { channels: 3, height: 16, width: 16 };
        let (mut f1, mut f2) = (vec![0u8; shape.len()], vec![0u8; shape.len()]);
        render(&a, 10, 0, shape, &mut f1);
        render(&b, 10, 0, shape, &mut f2);
        assert_eq!(f1, f2);
    }
}
