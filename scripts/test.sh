#!/usr/bin/env bash
# What CI runs, cheapest first: formatting, lints (the GPU backends included, so that they
# compile), tests (in release: tests, benches and the trainer share one build; then a second
# one without FFmpeg and with wgpu, on lavapipe), documentation.
set -euo pipefail
cd "$(dirname "$0")/.."
# SVT-AV1 prints a banner on stderr for every encoder the synthetic writer opens.
export SVT_LOG="${SVT_LOG:-1}"

# TensorBoard's own reader checks our event files (trainer/tests/tensorboard.rs); moto's S3
# server serves a streamed dataset (datasets/tests/stream.rs).
venv=target/test-python
if ! "$venv/bin/python" -c "import tensorboard, moto.server" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "tensorboard==2.20.0" "moto[server]==5.2.5"
fi
export TEST_PYTHON="$PWD/$venv/bin/python"

cargo fmt --all --check
# Inside every crate the modules import one way (a cycle between files fails here), and the
# checker's own tests.
python3 scripts/test_check_module_cycles.py
python3 scripts/check-module-cycles.py
# The table a GPU call ends with (scripts/gpu-run.sh best), on a log and samples written as a call writes them.
python3 bench/test_gpu_table.py
# The tests keep their frame caches in folders of their own: none may appear in the user's.
shm_caches() { ls -A /dev/shm/lerobot-rs-frames 2>/dev/null | sort || true; }
caches_before=$(shm_caches)
# The libraries link no command-line crates: those belong to the tools' `cli` feature.
library_deps=$(cargo tree -p datasets -p loader -p transforms -p trainer --no-default-features \
  --edges normal --prefix none --locked)
if grep -E '^(clap|anyhow|indicatif|tracing-subscriber) ' <<<"$library_deps"; then
  echo "error: a library crate depends on a command-line crate (see above)" >&2
  exit 1
fi
# Lints and docs see the GPU backends too (`cuda` and `wgpu` compile without a GPU), so that
# their code cannot rot unseen (the lavapipe tests at the end among it); both share one check
# build. All of it in the release profile, as the builds below: its build scripts and procedural
# macros are compiled unoptimised, once for all of them (the dev profile optimises every
# dependency, theirs among them), and no code here depends on debug assertions.
gpu=(--features bench/wgpu,bench/cuda,bench/cudnn,trainer/wgpu-untuned,trainer/mpi)
cargo clippy --release --workspace --all-targets --locked "${gpu[@]}" -- -D warnings
# ... and without FFmpeg, as the GPU kit builds them (scripts/gpu-kit.sh).
cargo clippy --release --workspace --all-targets --locked "${gpu[@]}" --no-default-features \
  --features datasets/cli,trainer/cli -- -D warnings
# One release build for the tests, the bench (CI's regression check runs the target/release/bench
# it makes, after this script) and the trainer. MPI (Open MPI, from install-debian-packages.sh):
# trainer/tests/cpu/mpi.rs starts runs of two processes with mpirun.
tests=(--features trainer/mpi)
cargo test --workspace --release --locked "${tests[@]}"
# The ignored tests that need the venv's servers, in the same build (one package alone would
# resolve other features and rebuild half the workspace: 348 s on two cores).
cargo test --workspace --release --locked "${tests[@]}" --test tensorboard --test stream -- --ignored
# The Python wheel (python/): built by maturin from the same release build, installed in a fresh
# virtual environment with numpy only (and pytest), and tested there (python/tests).
"$venv/bin/pip" install --quiet --disable-pip-version-check "maturin==1.9.4"
rm -rf target/wheels target/test-wheel
# --auditwheel skip: the module links the system's FFmpeg, which a manylinux wheel would bundle.
"$venv/bin/maturin" build --release --locked --quiet -m python/Cargo.toml -o target/wheels --auditwheel skip
python3 -m venv target/test-wheel
target/test-wheel/bin/pip install --quiet --disable-pip-version-check "numpy==2.4.6" "pytest==9.2.0" target/wheels/*.whl
(cd target && test-wheel/bin/python -m pytest -q ../python/tests)
# The tests that need PyTorch and LeRobot 0.6.1 (skipped above), where a venv with them is named.
if [[ -n "${LEROBOT_VENV:-}" ]]; then
  scripts/test-with-lerobot.sh "$LEROBOT_VENV"
fi
# One build without FFmpeg (the `video` features off, as the GPU kit builds them; the second
# clippy run above compiles all of it) and with burn's wgpu backend and its fusion (no
# autotuning), run on Mesa's lavapipe (Vulkan on the CPU, from the install script). A GPU backend
# in the build above would instantiate every task for it; here only the tests below use it.
# - how the dataset crate refuses video (datasets/tests/no_video.rs);
# - our cubecl kernels against the CPU's passes (kernels/tests/cube/), each on wgpu without
#   fusion and under it, as fusion's custom operations (kernels/src/fusion/);
# - one training step of the tiny policy without fusion (trainer/tests/tiny_step/): the kernels
#   it launches, against budgets, compiled into a kernel cache of the test's own; and what a
#   warmed step uploads and waits for from the host: its batch, noise, crop windows and Adam's
#   scalars only, no blocking call, no memory held anew;
# - the optimiser's update of weights kept as views of one buffer against the CPU's, without
#   fusion and under it (trainer/tests/weight_views.rs);
# - a batch's inputs from the frame caches' frames gathered on the device against the same
#   batch's frames uploaded, without fusion and under it (trainer/tests/device_frames.rs);
# - the encoder held channels-last against channels-first (trainer/tests/channels_last.rs);
# - with cuDNN's convolutions built in (no GPU here): burn's convolutions mapped to cuDNN's
#   descriptors, the one-line fallback where cuDNN is missing, and the file that keeps cuDNN's
#   algorithms for later runs (kernels/tests/cudnn.rs);
# - with NCCL built in (no GPU here): the library looked for, and every device group call's
#   one-line error where it is missing, switched off, or not a library (kernels/tests/nccl.rs).
# Our crates' code and burn's CPU backend (the tests' reference) are compiled there unoptimised
# (opt-level 0): the two test binaries that instantiate every kernel for wgpu, and the step for
# it, are most of the build, and what the tests run is lavapipe's code, not theirs. At opt-level
# 1 those binaries, `kernels` and burn-flex took 1,015 s of compilation on two cores, at 0 they
# take 182 s, and the tests run as long (bench/RESULTS.md, "Clipping in the launch that totals
# the squares; CI's lavapipe build unoptimised"). The other crates keep the release profile.
light=(--config 'profile.release.package.kernels.opt-level=0' --config 'profile.release.package.trainer.opt-level=0'
  --config 'profile.release.package.burn-flex.opt-level=0')
kernel_cache=$(mktemp -d)
LEROBOT_RS_KERNEL_CACHE="$kernel_cache" cargo test --release "${light[@]}" --locked -p datasets -p kernels -p trainer \
  --no-default-features --features datasets/cli,trainer/wgpu-untuned,kernels/nccl,kernels/gpu-fusion \
  --test no_video --test cube --test tiny_step --test weight_views --test device_frames --test channels_last \
  --test cudnn --test nccl
rm -rf "$kernel_cache"
if [[ "$(shm_caches)" != "$caches_before" ]]; then
  echo "error: the tests left frame caches in /dev/shm/lerobot-rs-frames:" >&2
  diff <(echo "$caches_before") <(shm_caches) >&2 || true
  exit 1
fi
RUSTDOCFLAGS="-D warnings" cargo doc --release --workspace --no-deps --locked "${gpu[@]}"
