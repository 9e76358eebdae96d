"""`make wheel` builds one reproducible platform wheel that is the whole
installation: a fresh venv with only that wheel writes a dataset with
sluice.MDSWriter and runs the README's PyTorch example on it, with no
sluice binary on PATH and no SLUICE_BIN."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
import zipfile

import helpers

SCRIPT = textwrap.dedent("""
    import os, sys
    import sluice
    from sluice import _agent
    site = sys.argv[1]
    assert sluice.__file__.startswith(site), sluice.__file__
    assert _agent.find_binary() == os.path.join(os.path.dirname(sluice.__file__), "bin", "sluice"), _agent.find_binary()
    data, cache = sys.argv[2], sys.argv[3]
    with sluice.MDSWriter(out=data, columns={"id": "int", "text": "str"}, compression="zstd", size_limit="8kb") as w:
        for i in range(1000):
            w.write({"id": i, "text": "sample %d" % i})

    # The README's PyTorch example, on the local dataset.
    from sluice import StreamingDataset, StreamingDataLoader
    ds = StreamingDataset(remote=data, local=cache, shuffle=True, batch_size=32, cache_limit="200mb")
    loader = StreamingDataLoader(ds, batch_size=32, num_workers=2)
    ids = []
    for batch in loader:
        ids.extend(int(x) for x in batch["id"])
    assert sorted(ids) == list(range(1000)), (len(ids), sorted(ids)[:5])
    assert ids != list(range(1000)), "not shuffled"
    state = loader.state_dict()
    assert "sample_in_epoch" in str(state), state
    print("ok", sluice.__version__)
""")


class WheelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sluice-wheel-")
        if sys.executable != "/usr/bin/python3" and not os.path.exists("/usr/bin/python3"):
            raise unittest.SkipTest("needs Debian's /usr/bin/python3")

    @classmethod
    def tearDownClass(cls):
        helpers.stop_agent(os.path.join(cls.tmp, "agent"))
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def build(self, out):
        env = dict(os.environ, SOURCE_DATE_EPOCH="1764547200")
        p = subprocess.run(["bash", os.path.join(helpers.ROOT, "python", "build-wheel.sh"), out],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
        self.assertEqual(p.returncode, 0, p.stdout.decode())
        whls = [f for f in os.listdir(out) if f.endswith(".whl")]
        self.assertEqual(len(whls), 1, whls)
        return os.path.join(out, whls[0])

    def tree_state(self):
        """A digest of the source tree (HEAD, changes, untracked files), to
        tell a non-reproducible build from a tree edited between builds."""
        run = lambda *a: subprocess.run(["git"] + list(a), cwd=helpers.ROOT, stdout=subprocess.PIPE).stdout  # noqa: E731
        return hashlib.sha256(run("rev-parse", "HEAD") + run("diff", "HEAD") +
                              run("ls-files", "--others", "--exclude-standard")).hexdigest()

    def test_wheel_is_the_whole_installation(self):
        import sluice

        before = self.tree_state()
        whl = self.build(os.path.join(self.tmp, "d1"))
        self.assertEqual(os.path.basename(whl), "sluice-%s-py3-none-manylinux2014_x86_64.whl" % sluice.__version__)
        with zipfile.ZipFile(whl) as z:
            bins = [i for i in z.infolist() if i.filename.endswith("sluice/bin/sluice")]
            self.assertEqual(len(bins), 1)
            self.assertEqual(bins[0].external_attr >> 16 & 0o777, 0o755)
            with z.open(bins[0]) as f:
                self.assertEqual(f.read(4), b"\x7fELF")
        # Reproducible: a second build is the same file.
        again = self.build(os.path.join(self.tmp, "d2"))
        digest = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()  # noqa: E731
        if self.tree_state() == before:  # else someone edited the checkout meanwhile
            self.assertEqual(digest(whl), digest(again), "two builds of the same tree differ")

        venv = os.path.join(self.tmp, "venv")
        # Nothing of the test run's own installation may leak in.
        env = {k: v for k, v in os.environ.items() if k not in ("SLUICE_BIN", "PYTHONPATH")}
        env["PATH"] = os.path.join(venv, "bin") + ":/usr/bin:/bin"
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True, env=env)
        py = os.path.join(venv, "bin", "python")
        subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", whl], check=True, env=env)
        site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              stdout=subprocess.PIPE, check=True, env=env).stdout.decode().strip()
        env["SLUICE_AGENT_DIR"] = os.path.join(self.tmp, "agent")
        env["SLUICE_AGENT_IDLE_TIMEOUT"] = "20s"
        p = subprocess.run([py, "-c", SCRIPT, site, os.path.join(self.tmp, "data"), os.path.join(self.tmp, "cache")],
                           env=env, cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout.decode())
        self.assertIn("ok %s" % sluice.__version__, p.stdout.decode())
        v = subprocess.run([os.path.join(site, "sluice", "bin", "sluice"), "--version"],
                           stdout=subprocess.PIPE, check=True).stdout.decode()
        self.assertTrue(v.startswith("sluice %s " % sluice.__version__), v)


if __name__ == "__main__":
    unittest.main()
