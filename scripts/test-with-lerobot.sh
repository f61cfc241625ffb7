#!/usr/bin/env bash
# The Python tests that need PyTorch and LeRobot 0.6.1, which CI skips (PyTorch with its CUDA
# libraries is several GB): `lerobot_rs.torch` (python/tests/test_torch.py) and the
# `lerobot-train` drop-in against LeRobot's own training (python/tests/test_lerobot_train.py).
#
#   scripts/test-with-lerobot.sh LEROBOT_VENV
#
# LEROBOT_VENV: a virtual environment with `pip install "lerobot[training]==0.6.1"` (Python
# >= 3.12). It is not changed: a venv of its own sees its packages, with the wheel that
# ./scripts/test.sh built (target/wheels) and pytest installed over them.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: scripts/test-with-lerobot.sh LEROBOT_VENV}
venv=target/test-lerobot
rm -rf "$venv"
"$base/bin/python" -m venv "$venv"
purelib() { "$1" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"; }
purelib "$base/bin/python" > "$(purelib "$venv/bin/python")/lerobot-venv.pth"
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
"${pip[@]}" "pytest==9.2.0"
"${pip[@]}" --no-deps target/wheels/*.whl
(cd target && test-lerobot/bin/python -m pytest -q ../python/tests)
