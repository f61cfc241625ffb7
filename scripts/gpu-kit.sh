#!/usr/bin/env bash
# Builds, on this machine, what the GPU machine runs: it has no Rust toolchain, no FFmpeg and no
# network, and at most 64 MiB travel to it with the working tree. Into target/gpu-kit (ignored):
#   bin.tar.xz  bench (its sweep and its GPU checks, `bench gpu-check`) and datasets (to
#               synthesise datasets there): release builds without FFmpeg
#               (`--no-default-features`), with the cuda and wgpu backends, stripped; they link
#               nothing beyond glibc (burn's cuda backend opens libcuda and NVRTC at run time).
#               bench-untuned is bench without burn's autotuning and fusion (`*-untuned`
#               features): far fewer kernels to compile on a machine's first run; its cuda
#               convolutions run in cuDNN (`bench/cudnn`), found there at run time.
#               bench-fusion is the build a user trains with (`--features cuda`): burn's fusion
#               without autotuning, cuDNN and our kernels as fusion's custom operations. bench
#               itself is built with burn's autotuning (`cuda-autotune`, `wgpu`).
#               NO_AUTOTUNE=1 builds those two and datasets alone, without LeRobot's wheels
#               (what `gpu-run.sh cudnn` and `frames` need; its sweeps need the tuned bench).
#               The trainer binary stays home: the working tree takes 30 of the 64 MiB, and
#               bench's checks run the trainer's own training loop.
#   wheels/     LeRobot 0.6.1 and the wheels that machine lacks for the side-by-side (torch is
#               there; PyAV is not carried: bench/lerobot/av_stub stands in for it)
#   vulkan/     Debian's Vulkan loader (libvulkan1), for the wgpu checks where the machine has
#               none (the NVIDIA driver's ICD is there; the loader may not be)
# Then carry target/gpu-kit and run scripts/gpu-run.sh there (see it).
set -euo pipefail
cd "$(dirname "$0")/.."

kit=target/gpu-kit
staging=target/gpu-kit-bin
rm -rf "$staging" && mkdir -p "$staging"
cargo build --release --locked -p bench --no-default-features \
  --features bench/cuda-untuned,bench/wgpu-untuned,bench/cudnn
cp target/release/bench "$staging/bench-untuned"
cargo build --release --locked -p bench --no-default-features \
  --features bench/cuda,bench/wgpu-untuned
cp target/release/bench "$staging/bench-fusion"
# The datasets tool (synthetic datasets and frame caches there: `gpu-run.sh frames`).
cargo build --release --locked -p datasets --no-default-features --features datasets/cli
cp target/release/datasets "$staging/"
if [ "${NO_AUTOTUNE:-0}" != 1 ]; then
  cargo build --release --locked -p bench --no-default-features --features bench/cuda-autotune,bench/wgpu
  cp target/release/bench "$staging/"
fi

# Keep the GPU kernel cache a GPU call sent back (scripts/gpu-run.sh): it outlives the binaries.
if [ -f "$kit/gpu-cache.tar.xz" ]; then mv "$kit/gpu-cache.tar.xz" target/gpu-cache.tar.xz.keep; fi
rm -rf "$kit"
mkdir -p "$kit/wheels"
if [ -f target/gpu-cache.tar.xz.keep ]; then mv target/gpu-cache.tar.xz.keep "$kit/gpu-cache.tar.xz"; fi
mv "$staging" "$kit/bin"
strip "$kit/bin/"*
for binary in "$kit/bin/"*; do
  extra=$(ldd "$binary" | awk '{print $1}' \
    | grep -v -E '^(linux-vdso\.so|/lib64/ld-linux-x86-64\.so|libc\.so|libm\.so|libgcc_s\.so|libpthread\.so|libdl\.so|librt\.so)' || true)
  if [ -n "$extra" ]; then
    echo "error: $binary links libraries the GPU machine may lack: $extra" >&2
    exit 1
  fi
done
XZ_OPT=-9 tar -C "$kit" -cJf "$kit/bin.tar.xz" bin
rm -rf "$kit/bin"

# LeRobot 0.6.1 and what it needs beyond the GPU machine's python3 (3.12, torch 2.11, ...).
[ "${NO_AUTOTUNE:-0}" = 1 ] || python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --dest "$kit/wheels" \
  lerobot==0.6.1 diffusers==0.39.0 datasets==4.8.5 dill==0.4.1 multiprocess==0.70.19 \
  draccus==0.11.6 mergedeep==1.3.4 pyyaml-include==2.2 toml==0.10.2 gymnasium==1.4.0 \
  farama-notifications==0.0.6 termcolor==3.3.0 jsonlines==4.0.0 importlib_metadata==10.2.0

# The Vulkan loader, unpacked there into /tmp by gpu-run.sh (never into /).
mkdir -p "$kit/vulkan"
(cd "$kit/vulkan" && apt-get download -q libvulkan1 2>/dev/null)

size=$(du -sb "$kit" | cut -f1)
echo "$kit: $((size / 1024 / 1024)) MiB ($(ls "$kit/wheels" | wc -l) wheels)"
if [ "$size" -gt $((64 * 1024 * 1024)) ]; then
  echo "error: the kit is over the 64 MiB that may travel" >&2
  exit 1
fi
