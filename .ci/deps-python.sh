#!/usr/bin/env bash
# Installs Debian's python3 with torch, numpy and Pillow for the client tests
# (and sentencepiece, the reference the Go tokenizer's tests compare with;
# torchvision, whose decode_jpeg checks encoded_tensors' lists, matching
# Debian's torch: python3-torchvision 0.14.1 is built for libtorch 1.13),
# plus pip, setuptools and wheel so that `pip install ./python
# --no-build-isolation` works offline, and venv (the wheel test installs
# the wheel into a fresh venv). Quick when everything is present.
set -euo pipefail
PY=/usr/bin/python3
check() {
  [ -x "$PY" ] && "$PY" - <<'PYEOF' 2>/dev/null
import setuptools, wheel, pip, ensurepip, numpy, PIL, torch, torchvision, sentencepiece
print("python deps present: torch", torch.__version__, "torchvision", torchvision.__version__, "numpy", numpy.__version__, "Pillow", PIL.__version__)
PYEOF
}
if check; then
  exit 0
fi
SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  python3 python3-torch python3-numpy python3-pil python3-pip python3-setuptools python3-wheel \
  python3-sentencepiece python3-venv python3-torchvision
check || { echo "python deps still missing after apt-get install" >&2; exit 1; }
