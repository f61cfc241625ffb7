#!/usr/bin/env bash
# A wheel tried as a new user would: `pip install` into a fresh venv on a clean Debian 12 (a
# minimal debootstrap chroot: Python and nothing of FFmpeg's), then the wheel's own tests
# (python/tests: LeRobot's video datasets read, samples equal to the bit to those LeRobot
# returned). Needs root, debootstrap and network; the chroot stays in target/clean-debian.
#
#   scripts/check-wheel-on-clean-debian.sh [WHEEL]    # default: target/wheels-portable/*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=$(realpath "${1:-$(ls target/wheels-portable/*.whl | head -1)}")
root=$PWD/target/clean-debian
if [[ ! -x "$root/usr/bin/python3" ]]; then
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" \
    http://deb.debian.org/debian >/dev/null
fi
if ls "$root"/usr/lib/x86_64-linux-gnu | grep -E '^lib(av|sw|dav1d)'; then
  echo "error: the clean system has FFmpeg's libraries (above)" >&2
  exit 1
fi
# The host's name server and trusted certificates (a proxy's among them), for pip.
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
rm -rf "$root/opt/check" && mkdir -p "$root/opt/check"
cp "$wheel" "$root/opt/check/"
mkdir -p "$root/opt/check/python" "$root/opt/check/tests"
cp -r python/tests "$root/opt/check/python/"
cp -r tests/fixtures "$root/opt/check/tests/"
mount -t proc proc "$root/proc"
trap 'umount "$root/proc"' EXIT
chroot "$root" /bin/sh -euc '
  cd /opt/check
  python3 -m venv venv
  venv/bin/pip install --quiet --disable-pip-version-check ./*.whl "pytest==9.2.0"
  venv/bin/python -c "import lerobot_rs, sys; print(lerobot_rs.__file__, sys.version.split()[0])"
  venv/bin/python -m pytest -q python/tests
'
