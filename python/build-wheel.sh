#!/usr/bin/env bash
# Builds the platform wheel that carries the sluice binary:
#   dist/sluice-<version>-py3-none-manylinux2014_x86_64.whl
# with sluice/bin/sluice inside (static: CGO_ENABLED=0; stripped and
# reproducible: -trimpath, -ldflags='-s -w -buildid=', no VCS stamp, and
# SOURCE_DATE_EPOCH for every timestamp in the archive). Offline: Debian's
# python3-setuptools/python3-wheel, no build isolation, no index.
# Usage: python/build-wheel.sh [OUT_DIR]   (make wheel)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-$root/dist}
PY=${PYTHON:-/usr/bin/python3}
GO=${GO:-go}
version=$(tr -d '[:space:]' < internal/version/VERSION)
pyversion=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' python/sluice/_version.py)
if [ "$version" != "$pyversion" ]; then
  echo "build-wheel: internal/version/VERSION ($version) and python/sluice/_version.py ($pyversion) differ" >&2
  exit 1
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)}
plat=manylinux2014_x86_64
work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Copy only what the package is made of, so stray files never ship.
mkdir -p "$work/src/sluice/bin"
cp python/pyproject.toml python/README.md "$work/src/"
cp python/sluice/*.py "$work/src/sluice/"
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" build -trimpath -buildvcs=false \
  -ldflags='-s -w -buildid=' -o "$work/src/sluice/bin/sluice" ./cmd/sluice
# A platform wheel (the binary is x86-64 Linux): not pure, tag py3-none-$plat.
cat > "$work/src/setup.py" <<PYEOF
from setuptools import setup
from wheel.bdist_wheel import bdist_wheel


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return "py3", "none", "$plat"


setup(cmdclass={"bdist_wheel": PlatformWheel})
PYEOF
# Fixed modes and times, so that two builds are byte-identical.
find "$work/src" -type d -exec chmod 755 {} +
find "$work/src" -type f -exec chmod 644 {} +
chmod 755 "$work/src/sluice/bin/sluice"
find "$work/src" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
(cd "$work/src" && umask 022 && "$PY" -m pip wheel --quiet --no-build-isolation --no-deps --no-index \
  --wheel-dir "$work/dist" . 2>&1 | grep -v 'Setuptools is replacing distutils' || true)
whl=$(ls "$work/dist"/sluice-"$version"-py3-none-"$plat".whl)
mkdir -p "$out"
cp "$whl" "$out/"
size=$(stat -c %s "$work/src/sluice/bin/sluice")
echo "built $out/$(basename "$whl") (binary $((size / 1024 / 1024)) MiB, $size bytes; sha256 $(sha256sum "$whl" | cut -c1-16))"
