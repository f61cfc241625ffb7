#!/usr/bin/env bash
# The main job on a small built-in example: synthesise a LeRobot v3.0 dataset, print what it
# holds, and write the Diffusion Policy samples of a few frames as LeRobot would return them.
set -euo pipefail
cd "$(dirname "$0")/.."
export SVT_LOG="${SVT_LOG:-1}"
out="${1:-${TMPDIR:-/tmp}/lerobot-rs-demo}"
rm -rf "$out"
cargo run --release --locked -p datasets -- synth --out "$out/dataset" --episodes 8
cargo run --release --locked -p datasets -- info --root "$out/dataset"
cargo run --release --locked -p datasets -- sample --root "$out/dataset" --indices 0,17,42 --preset diffusion --out "$out/batch.safetensors"
