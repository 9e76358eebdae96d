"""Per-job store settings on one shared agent, against the real S3 server
of .ci/services.sh (versitygw): the agent is started by a job without any
S3 settings, then jobs with their own endpoint and keys read their own
buckets through it, and a job with wrong keys is refused instead of being
served the data another job's keys fetched."""

import json
import os
import subprocess
import sys
import unittest

import helpers

S3 = {k: os.environ.get("SLUICE_TEST_S3_" + k) for k in ("ENDPOINT", "BUCKET", "REGION", "ACCESS_KEY", "SECRET_KEY")}

READ = (
    "import json, sys, helpers, sluice\n"
    "cfg = json.loads(sys.argv[1])\n"
    "try:\n"
    "    ds = sluice.StreamingDataset(remote=cfg['remote'], local=cfg['local'], batch_size=4)\n"
    "    print(json.dumps({'ids': sorted(int(s['id']) for s in ds)}))\n"
    "except sluice.SluiceError as e:\n"
    "    print(json.dumps({'error': type(e).__name__, 'message': str(e)}))\n"
)


def clean_env():
    """This environment without any store settings."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "S3_", "GOOGLE_", "GCS_", "AZURE_")) and k != "STORAGE_EMULATOR_HOST"}


def s3_env(secret=None):
    env = clean_env()
    env.update(S3_ENDPOINT_URL=S3["ENDPOINT"], AWS_ACCESS_KEY_ID=S3["ACCESS_KEY"],
               AWS_SECRET_ACCESS_KEY=secret or S3["SECRET_KEY"], AWS_REGION=S3["REGION"],
               AWS_EC2_METADATA_DISABLED="true")
    return env


@unittest.skipUnless(S3["ENDPOINT"] or os.environ.get("CI"), "no S3 test server (run under .ci/with-services.sh)")
class JobEnvTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not S3["ENDPOINT"]:
            raise AssertionError("CI without SLUICE_TEST_S3_ENDPOINT")
        cls.bucket_b = S3["BUCKET"] + "-jobenv"
        code = subprocess.run(
            ["curl", "-s", "-o", os.devnull, "-w", "%{http_code}", "-X", "PUT",
             "--aws-sigv4", "aws:amz:%s:s3" % S3["REGION"],
             "-H", "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
             "--user", "%s:%s" % (S3["ACCESS_KEY"], S3["SECRET_KEY"]), "%s/%s" % (S3["ENDPOINT"], cls.bucket_b)],
            stdout=subprocess.PIPE, check=True).stdout.decode()
        if code not in ("200", "409"):
            raise AssertionError("create bucket %s: HTTP %s" % (cls.bucket_b, code))
        cls.remotes = {}
        for name, bucket, n in (("a", S3["BUCKET"], 30), ("b", cls.bucket_b, 20)):
            src = os.path.join(cls.tmp, "src-" + name)
            helpers.write_ids(src, n, size_limit=300)
            url = "s3://%s/jobenv/%s" % (bucket, name)
            subprocess.run([helpers.binary(), "cp", src, url], env=s3_env(), check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            cls.remotes[name] = (url, n)

    def read(self, env, remote, local):
        cfg = {"remote": remote, "local": os.path.join(self.tmp, local)}
        p = subprocess.run([sys.executable, "-c", READ, json.dumps(cfg)], env=env, cwd=helpers.HERE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode()[-2000:])
        return json.loads(p.stdout.decode().strip().splitlines()[-1])

    def test_jobs_use_their_own_settings(self):
        # The agent is started by a job with no store settings at all.
        helpers.stop_agent(self.agent_dir)
        local_src = os.path.join(self.tmp, "plain")
        helpers.write_ids(local_src, 5)
        self.assertEqual(self.read(clean_env(), local_src, "plain-cache")["ids"], list(range(5)))
        pid = helpers.agent_pid(self.agent_dir)
        self.assertIsNotNone(pid)
        with open("/proc/%d/environ" % pid, "rb") as f:
            agent_env = f.read().split(b"\0")
        self.assertFalse([v for v in agent_env if v.startswith((b"AWS_", b"S3_"))])

        # Jobs with their endpoint and keys read their own buckets.
        url_a, n_a = self.remotes["a"]
        url_b, n_b = self.remotes["b"]
        self.assertEqual(self.read(s3_env(), url_a, "cache-a")["ids"], list(range(n_a)))
        self.assertEqual(self.read(s3_env(), url_b, "cache-b")["ids"], list(range(n_b)))

        # Wrong keys on the dataset (and local) job A has cached: refused.
        got = self.read(s3_env(secret="not-the-secret"), url_a, "cache-a")
        self.assertIn("error", got, "a job with wrong keys was served the cached data")
        self.assertEqual(helpers.agent_pid(self.agent_dir), pid)
        # And the right keys still work afterwards.
        self.assertEqual(self.read(s3_env(), url_a, "cache-a")["ids"], list(range(n_a)))

    def test_gcs_hmac_keys(self):
        # A MosaicML user's gs:// dataset with GCS_KEY and GCS_SECRET (the
        # S3 server standing in for GCS's XML endpoint; region= because
        # versitygw checks it where GCS takes "auto").
        helpers.stop_agent(self.agent_dir)
        url_a, n_a = self.remotes["a"]
        remote = "gs://%s/jobenv/a?endpoint=%s&region=%s" % (S3["BUCKET"], S3["ENDPOINT"], S3["REGION"])

        def gcs_env(secret):
            env = clean_env()
            env.update(GCS_KEY=S3["ACCESS_KEY"], GCS_SECRET=secret, AWS_EC2_METADATA_DISABLED="true")
            return env

        self.assertEqual(self.read(gcs_env(S3["SECRET_KEY"]), remote, "gcs-a")["ids"], list(range(n_a)))
        # Another job on the same agent with a wrong secret, on the local
        # the first job has cached: refused, the secret not shown.
        got = self.read(gcs_env("not-the-secret-0123"), remote, "gcs-a")
        self.assertIn("error", got, "a job with a wrong GCS_SECRET was served the cached data")
        self.assertIn("GCS_KEY and GCS_SECRET", got["message"])
        self.assertNotIn("not-the-secret-0123", got["message"])
        self.assertEqual(self.read(gcs_env(S3["SECRET_KEY"]), remote, "gcs-a")["ids"], list(range(n_a)))


if __name__ == "__main__":
    unittest.main()
