"""Launcher detection (sluice._world.placement) against the cases the Go
detector (plan.DetectWorld) is tested with: plan/testdata/launchers.json."""

import json
import os
import subprocess
import sys
import unittest

import helpers

from sluice import _world

CASES = os.path.join(helpers.ROOT, "plan", "testdata", "launchers.json")


class PlacementTest(unittest.TestCase):
    def test_shared_cases(self):
        with open(CASES) as f:
            cases = json.load(f)["cases"]
        self.assertGreaterEqual(len(cases), 20)
        for c in cases:
            with self.subTest(c["name"]):
                if c.get("error") == "conflict":
                    with self.assertRaises(_world.LauncherConflictError):
                        _world.placement(c["env"])
                    continue
                if c.get("error") == "invalid":
                    with self.assertRaises(ValueError) as cm:
                        _world.placement(c["env"])
                    self.assertNotIsInstance(cm.exception, _world.LauncherConflictError)
                    continue
                got = _world.placement(c["env"])
                want = dict(c["want"])
                want.setdefault("outer", [])
                want.setdefault("job_id", "")
                self.assertEqual(got, want)

    def test_detect_uses_the_launcher(self):
        # A Slurm task started by srun (no torchrun): the dataset's world
        # is Slurm's, in a real child process's environment.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "SLURM_", "OMPI_", "PET_"))}
        env.update(SLURM_PROCID="3", SLURM_NTASKS="4", SLURM_NNODES="2", SLURM_LOCALID="1", SLURM_JOB_ID="42", SLURM_STEP_ID="0")
        code = "import json, sluice._world as w; print(json.dumps([w.detect(), w.job_key()]))"
        out = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=os.pathsep.join(sys.path)),
                             check=True, stdout=subprocess.PIPE).stdout
        world, key = json.loads(out)
        self.assertEqual(world, {"rank": 3, "world_size": 4, "local_world_size": 2, "worker": 0, "num_workers": 1})
        self.assertEqual(key, "slurm:42.0")
        env.update(RANK="2", WORLD_SIZE="4", LOCAL_WORLD_SIZE="2")
        p = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=os.pathsep.join(sys.path)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b"LauncherConflictError", p.stderr)


if __name__ == "__main__":
    unittest.main()
