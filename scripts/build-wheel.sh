#!/usr/bin/env bash
# The Python wheel that installs on any x86_64 Linux with glibc >= 2.34 (manylinux_2_34): the
# extension built against a small FFmpeg of our own (MP4 and Matroska demuxers; AV1 by dav1d,
# H.264, HEVC and VP9 decoders; no devices, network, filters or encoders, though the
# libraries that would hold them are built: ffmpeg-next binds them), whose shared
# libraries maturin's repair copies into the wheel with patchelf, as PyAV and opencv-python
# ship theirs. The build machine's FFmpeg is not used: Debian's links some 200 libraries.
#
#   scripts/build-wheel.sh [OUT]     # OUT: the wheel's folder, default target/wheels-portable
#
# Needs what install-debian-packages.sh installs (a C compiler, nasm, pkg-config, dav1d's
# headers, Python's venv), and network for FFmpeg's source (Debian's archive, checked against its
# SHA-256) unless FFMPEG_SOURCE names the tarball. FFmpeg is built once into target/ffmpeg-wheel;
# the extension in target/wheel-build, apart from the tests' build (another FFmpeg means other
# bindings).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/wheels-portable}
version=5.1.9
sha256=d9b593bb2ba93d4b50f74177e0cdcd41747e708596367deed0c30348a71dd176
prefix=$PWD/target/ffmpeg-wheel

if [[ ! -f "$prefix/lib/libavcodec.so" ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  tarball=${FFMPEG_SOURCE:-$work/ffmpeg-$version.tar.xz}
  if [[ -z "${FFMPEG_SOURCE:-}" ]]; then
    curl -fsSL -o "$tarball" "https://deb.debian.org/debian/pool/main/f/ffmpeg/ffmpeg_$version.orig.tar.xz"
  fi
  echo "$sha256  $tarball" | sha256sum --check --quiet
  tar -xJf "$tarball" -C "$work"
  (
    cd "$work/ffmpeg-$version"
    # LGPL only. What LeRobot's videos need to be read (the datasets crate decodes, converts
    # with swscale), nothing else; no system library is picked up unasked.
    ./configure --prefix="$prefix" --enable-shared --disable-static --enable-pic \
      --disable-programs --disable-doc --disable-autodetect --disable-everything \
      --disable-network \
      --enable-libdav1d --enable-zlib \
      --enable-decoder=libdav1d,h264,hevc,vp9,mpeg4 \
      --enable-parser=av1,h264,hevc,vp9,mpeg4video \
      --enable-demuxer=mov,matroska --enable-protocol=file
    make -j"$(nproc)" >/dev/null
    make install >/dev/null
  )
fi

venv=target/wheel-tools
if [[ ! -x "$venv/bin/maturin" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "maturin==1.9.4" "patchelf==0.17.2.4"
fi
# maturin finds patchelf on the PATH, and the libraries to bundle on LD_LIBRARY_PATH.
PATH="$PWD/$venv/bin:$PATH" FFMPEG_DIR="$prefix" LD_LIBRARY_PATH="$prefix/lib" \
  PKG_CONFIG_PATH="$prefix/lib/pkgconfig" CARGO_TARGET_DIR=target/wheel-build \
  maturin build --release --locked -m python/Cargo.toml --compatibility manylinux_2_34 -o "$out"
