#!/usr/bin/env bash
# Sets a Debian 12 (or later) machine up to build and test this project: installs the Debian
# packages the build needs (a C compiler and linker, git, curl for rustup's installer, FFmpeg's
# development libraries for video-rs and ffmpeg-next, libclang and pkg-config for their bindings,
# the ffmpeg command line, Open MPI for training across processes (the trainer's `mpi`
# feature, which the tests build), Python's venv for the test tools, and Mesa's Vulkan drivers
# (lavapipe: Vulkan on the CPU, where burn's wgpu backend runs our cubecl kernels and counts their
# launches without a GPU), nasm and dav1d's headers for the wheel's own FFmpeg
# (scripts/build-wheel.sh), debootstrap for trying the wheel on a clean Debian
# (scripts/check-wheel-on-clean-debian.sh), then checks for the Rust
# toolchain, which Debian's own rustc is too old to be: it says how to get it and fails if it is
# missing. Idempotent: installs nothing when everything is present. Uses sudo when not run as
# root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential git curl ca-certificates pkg-config libclang-dev
  libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev
  libavfilter-dev libavdevice-dev ffmpeg
  libopenmpi-dev openmpi-bin
  python3 python3-venv
  mesa-vulkan-drivers
  nasm libdav1d-dev debootstrap
)
missing=()
for p in "${packages[@]}"; do
  # Installed, not merely known (a removed package leaves "deinstall ok config-files").
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "error: these Debian packages are missing and installing them needs root:" >&2
      echo "  ${missing[*]}" >&2
      echo "run this script as root, or install sudo (as root: apt-get install sudo) and add yourself to group sudo" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  echo "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Rust: the toolchain pinned in rust-toolchain.toml, through rustup.
toolchain=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
rustup_hint="install rustup (https://rustup.rs), which installs Rust $toolchain on the first build:
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  . \"\$HOME/.cargo/env\"
(where sh.rustup.rs cannot be reached, the same installer is at
  https://static.rust-lang.org/rustup/dist/x86_64-unknown-linux-gnu/rustup-init: download it,
  chmod +x it and run it with -y --profile minimal)"
if ! command -v cargo >/dev/null; then
  echo "error: cargo not found: $rustup_hint" >&2
  exit 1
fi
if ! command -v rustup >/dev/null; then
  version=$(cargo --version | cut -d' ' -f2)
  if [ "$(printf '%s\n' "$toolchain" "$version" | sort -V | head -1)" != "$toolchain" ]; then
    echo "error: this cargo is $version (Debian's?), older than the $toolchain the project needs (edition 2024): $rustup_hint" >&2
    exit 1
  fi
fi
echo "ready: Debian packages present, $(cargo --version)"
