"""Job files: StreamingDataset.from_config (local and from the real S3
server), strict errors with line numbers, and the image's entry point
(docker/entrypoint.sh, run directly: no Docker engine runs in CI)."""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import helpers

import sluice
from sluice import config

N = 120
ENTRYPOINT = os.path.join(helpers.ROOT, "docker", "entrypoint.sh")

TRAIN = """\
kind: train
command: [{python}, {script}]
dataset:
  remote: {remote}
  local: {local}
  batch_size: 4
  shuffle: true
  shuffle_seed: 17
training:
  lr: 0.001
  steps: 30
"""

SCRIPT = """\
import json, os, sys
sys.path[:0] = {path!r}
import sluice
from sluice import config
ds = sluice.StreamingDataset.from_config(os.environ["SLUICE_CONFIG"])
ids = sorted(int(s["id"]) for s in ds)
print(json.dumps({{"ids": ids, "training": config.training()}}))
"""


class ConfigTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.remote = os.path.join(cls.tmp, "remote")
        helpers.write_ids(cls.remote, N, size_limit=1 << 10)

    def write(self, text, name="train.yaml"):
        d = tempfile.mkdtemp(dir=self.tmp)
        p = os.path.join(d, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def train_yaml(self, remote=None, local=None, script="train.py"):
        return TRAIN.format(python=sys.executable, script=script, remote=remote or self.remote,
                            local=local or os.path.join(self.tmp, "cache"))

    def test_from_config_equals_arguments(self):
        p = self.write(self.train_yaml())
        ds = sluice.StreamingDataset.from_config(p)
        self.assertEqual(ds.batch_size, 4)
        self.assertEqual(ds.shuffle_seed, 17)
        got = [int(s["id"]) for s in ds]
        want = [int(s["id"]) for s in sluice.StreamingDataset(remote=self.remote, local=os.path.join(self.tmp, "cache"),
                                                              batch_size=4, shuffle=True, shuffle_seed=17)]
        self.assertEqual(got, want)
        self.assertEqual(sorted(got), list(range(N)))
        # Overrides win; SLUICE_CONFIG is the default location.
        os.environ["SLUICE_CONFIG"] = p
        try:
            ds = sluice.StreamingDataset.from_config(shuffle=False)
            self.assertEqual([int(s["id"]) for s in ds], list(range(N)))
            self.assertEqual(config.training(), {"lr": 0.001, "steps": 30})
        finally:
            del os.environ["SLUICE_CONFIG"]

    def test_streams(self):
        p = self.write("kind: train\ncommand: [x]\ndataset:\n  batch_size: 2\n  streams:\n"
                       "    - {remote: %s, local: %s, choose: 10}\n" % (self.remote, os.path.join(self.tmp, "cache-s")))
        ds = sluice.StreamingDataset.from_config(p)
        self.assertEqual(len(list(ds)), 10)

    def test_errors_name_the_line(self):
        cases = [
            ("kind: train\ncommand: [x]\ndataset:\n  remote: /x\n  batch_sz: 4\n", ":5: dataset.batch_sz is not a StreamingDataset argument"),
            ("kind: train\ncommand: [x]\ndataset:\n  remote: /x\n  batch_size: four\n", ":5: dataset.batch_size: 'four' is not a valid value"),
            ("kind: train\ncommand: [x]\ndataset:\n  shuffle: 'yes'\n", ":4: dataset.shuffle"),
            ("kind: train\ncommand: [x]\ndataset:\n  streams:\n    - {remote: /x, weight: 2}\n", ":4: dataset.streams[0]: weight not a Stream argument"),
            ("kind: train\ncommand: [x]\ndatasets:\n  remote: /x\n", ":3: field datasets not found"),
            ("kind: train\ncommand: [x]\ndataset:\n  remote: /x\n  remote: /y\n", ":5: dataset: mapping key \"remote\" already defined"),
        ]
        for text, msg in cases:
            with self.subTest(msg):
                p = self.write(text)
                with self.assertRaises(config.ConfigError) as cm:
                    sluice.StreamingDataset.from_config(p)
                self.assertIn(p + msg, str(cm.exception))
        with self.assertRaises(config.ConfigError):
            sluice.StreamingDataset.from_config(os.path.join(self.tmp, "missing.yaml"))
        saved = os.environ.pop("SLUICE_CONFIG", None)
        try:
            with self.assertRaisesRegex(config.ConfigError, "SLUICE_CONFIG"):
                config.load()
        finally:
            if saved is not None:
                os.environ["SLUICE_CONFIG"] = saved

    def entrypoint(self, args, env_extra=None, **kw):
        bindir = tempfile.mkdtemp(dir=self.tmp)
        os.symlink(helpers.binary(), os.path.join(bindir, "sluice"))
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
        env.pop("SLUICE_BIN", None)  # the image finds sluice on PATH
        env.pop("SLUICE_CONFIG", None)
        env.update(env_extra or {})
        return subprocess.run(["sh", ENTRYPOINT] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300, **kw)

    def test_entrypoint_runs_a_training_config(self):
        d = tempfile.mkdtemp(dir=self.tmp)
        script = os.path.join(d, "train.py")
        with open(script, "w") as f:
            f.write(SCRIPT.format(path=[p for p in sys.path if p]))
        cfg = self.write(self.train_yaml(script=script))
        import json

        for args, extra in (([cfg], None), ([], {"SLUICE_CONFIG": cfg})):
            p = self.entrypoint(args, extra)
            self.assertEqual(p.returncode, 0, p.stderr.decode())
            out = json.loads(p.stdout.decode().strip().splitlines()[-1])
            self.assertEqual(out["ids"], list(range(N)))
            self.assertEqual(out["training"], {"lr": 0.001, "steps": 30})
        # Other forms: sluice subcommands, other programs, no argument.
        p = self.entrypoint(["sluice", "run", "--dry-run", cfg])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(script, p.stdout.decode())
        p = self.entrypoint(["sh", "-c", "echo other"])
        self.assertEqual(p.stdout, b"other\n")
        p = self.entrypoint([])
        self.assertEqual(p.returncode, 2)
        p = self.entrypoint([self.write("kind: train\ncommand: [x]\nbogus: 1\n")])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b":3: field bogus not found", p.stderr)

    def test_from_config_on_s3(self):
        endpoint = os.environ.get("SLUICE_TEST_S3_ENDPOINT")
        if not endpoint:
            if os.environ.get("SLUICE_REQUIRE_SERVICES") == "1":
                self.fail("SLUICE_TEST_S3_ENDPOINT is not set under CI (.ci/services.sh starts the S3 server)")
            self.skipTest("SLUICE_TEST_S3_ENDPOINT not set; run under .ci/with-services.sh")
        env = {"S3_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": os.environ["SLUICE_TEST_S3_ACCESS_KEY"],
               "AWS_SECRET_ACCESS_KEY": os.environ["SLUICE_TEST_S3_SECRET_KEY"], "AWS_REGION": os.environ["SLUICE_TEST_S3_REGION"]}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            base = "s3://%s/py-config-%d" % (os.environ["SLUICE_TEST_S3_BUCKET"], os.getpid())
            subprocess.run([helpers.binary(), "cp", self.remote, base + "/ds"], check=True, stdout=subprocess.DEVNULL)
            cfgdir = tempfile.mkdtemp(dir=self.tmp)
            with open(os.path.join(cfgdir, "train.yaml"), "w") as f:
                f.write(self.train_yaml(remote=base + "/ds", local=os.path.join(self.tmp, "s3-cache")))
            subprocess.run([helpers.binary(), "cp", cfgdir, base + "/configs"], check=True, stdout=subprocess.DEVNULL)
            ds = sluice.StreamingDataset.from_config(base + "/configs/train.yaml")
            self.assertEqual(sorted(int(s["id"]) for s in ds), list(range(N)))
            with self.assertRaises(config.ConfigError):
                config.load(base + "/configs/none.yaml")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


if __name__ == "__main__":
    unittest.main()
