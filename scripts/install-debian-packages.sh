#!/usr/bin/env bash
# Installs the Debian packages the build needs: FFmpeg's development libraries (video-rs and
# ffmpeg-next link them), libclang (bindgen generates FFmpeg's bindings), pkg-config, and the
# ffmpeg command line (handy to inspect videos). Idempotent: does nothing when all are present.
set -euo pipefail
packages=(
  libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev
  libavfilter-dev libavdevice-dev libclang-dev pkg-config ffmpeg
)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
