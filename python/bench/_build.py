"""The sluice binary the benchmarks run: $SLUICE_BIN when set, else one
built from this checkout into the benchmark's scratch directory (never a
binary cached by an earlier run, which may be of another checkout)."""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sluice_binary(work):
    """Sets SLUICE_BIN (building ./cmd/sluice into work/bin when unset)
    and returns it."""
    b = os.environ.get("SLUICE_BIN")
    if b:
        return b
    out = os.path.join(work, "bin", "sluice")
    subprocess.run(["go", "build", "-o", out, "./cmd/sluice"], cwd=ROOT, check=True)
    os.environ["SLUICE_BIN"] = out
    return out
