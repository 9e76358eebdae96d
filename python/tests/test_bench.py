"""python/bench/feed.py as docs/feed.md tells a user to run it: from a
checkout, with nothing but Debian's interpreter and Go (no SLUICE_BIN, no
sluice on PATH). It must build its agent, run every target on a tiny
epoch and print each figure beside its guard (the samples counted and the
sum of their ids), and the JPEG rows beside the decode ceiling measured
in the same run. Before, it stopped at its first dataset: "cannot find
the sluice binary", and its rows showed no guard."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import helpers

try:
    import numpy  # noqa: F401
    import PIL  # noqa: F401
    import torch  # noqa: F401
except ImportError:  # pragma: no cover
    torch = None

FEED = os.path.join(helpers.ROOT, "python", "bench", "feed.py")


@unittest.skipIf(torch is None or shutil.which("go") is None or not os.path.exists(FEED),
                 "needs torch, numpy, Pillow, Go and the source tree")
class FeedBenchTest(unittest.TestCase):
    def test_runs_from_a_checkout_and_prints_guards(self):
        tmp = tempfile.mkdtemp(prefix="sluice-benchtest-")
        self.addCleanup(shutil.rmtree, tmp, True)
        env = {k: v for k, v in os.environ.items() if k not in ("SLUICE_BIN", "SLUICE_AGENT_DIR", "SLUICE_FEED",
                                                                   "SLUICE_SHM", "SLUICE_IMAGE_DECODE")}
        # Nothing named sluice on PATH; the Go toolchain stays.
        go = os.path.dirname(shutil.which("go"))
        env["PATH"] = os.pathsep.join(p for p in (go, "/usr/bin", "/bin") if not os.path.exists(os.path.join(p, "sluice")))
        env["TMPDIR"] = tmp
        if not os.environ.get("SLUICE_TEST_INSTALLED"):
            env.pop("PYTHONPATH", None)
        n, m = 64, 32
        cmd = [sys.executable, FEED, "--large", str(n), "--images", str(m), "--small", "0", "--arrays", "0",
               "--limit-arrays", "0", "--slots-arrays", "0", "--repeat", "1", "--work", os.path.join(tmp, "work")]
        r = subprocess.run(cmd, cwd=helpers.ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=600)
        out = r.stdout
        self.assertEqual(r.returncode, 0, out[-3000:])
        # Every 100 KB row (three paths, then workers=0/2 and feed 2/8) and
        # every JPEG row with its guard: n samples, ids 0..n-1.
        large = re.findall(r"^  .*?\s(\d+) / (\d+)$", out, re.M)
        self.assertGreaterEqual(len(large), 3 + 4 + 2, out)
        for cnt, ids in large:
            self.assertIn((int(cnt), int(ids)), ((n, n * (n - 1) // 2), (m, m * (m - 1) // 2)), out)
        self.assertEqual(sum(1 for c, _ in large if int(c) == m), 2 * len({2, os.cpu_count()}), out)
        ceiling = re.search(r"= ceiling (\d+) img/s", out)
        self.assertIsNotNone(ceiling, out)
        self.assertGreater(int(ceiling.group(1)), 0)
        self.assertRegex(out, r"(?m)^  feed workers=2 \(threads\)\s+\d+\s+[\d.]+\s+\d+%")
        self.assertIn("40k-shard index.json", out)


if __name__ == "__main__":
    unittest.main()
