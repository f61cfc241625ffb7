#!/usr/bin/env bash
# What CI runs, cheapest first: formatting, lints, tests (in release: tests, benches and the
# trainer share one build), documentation.
set -euo pipefail
cd "$(dirname "$0")/.."
# SVT-AV1 prints a banner on stderr for every encoder the synthetic writer opens.
export SVT_LOG="${SVT_LOG:-1}"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --release --locked
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
