"""sluice's writers as a MosaicML user drives them: arguments, exceptions,
the other formats, a real S3 server, and processes killed mid-write."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import uuid

import helpers

import sluice
from sluice import writer as swriter


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _index(d):
    return json.loads(_read(os.path.join(d, "index.json")))


def _assert_index_sound(tc, d):
    """If d has an index.json, every file it names exists with its size."""
    p = os.path.join(d, "index.json")
    if not os.path.exists(p):
        return False
    for s in _index(d)["shards"]:
        for f in (s["raw_data"], s.get("zip_data")):
            if f is None or (s.get("zip_data") and f is s["raw_data"]):
                continue
            path = os.path.join(d, f["basename"])
            tc.assertTrue(os.path.exists(path), "index names missing %s" % f["basename"])
            tc.assertEqual(os.path.getsize(path), f["bytes"])
    return True


class WriterTestCase(unittest.TestCase):
    def setUp(self):
        helpers.binary()
        self.tmp = tempfile.mkdtemp(prefix="sluice-writer-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, *p):
        return os.path.join(self.tmp, *p)


class ArgumentTest(WriterTestCase):
    def test_size_limit_parsing(self):
        self.assertEqual(swriter.bytes_to_int("64mb"), 64 << 20)
        self.assertEqual(swriter.bytes_to_int("100kb"), 100 << 10)
        self.assertEqual(swriter.bytes_to_int("1.5KB"), 1536)
        self.assertEqual(swriter.bytes_to_int("200b"), 200)
        self.assertEqual(swriter.bytes_to_int(" 4096 "), 4096)
        self.assertEqual(swriter.bytes_to_int(1 << 26), 1 << 26)
        for bad in ("12xb", "mb", "1.5"):
            with self.assertRaises(ValueError, msg=bad):
                swriter.bytes_to_int(bad)
        with self.assertRaisesRegex(ValueError, "greater than zero"):
            sluice.MDSWriter(out=self.path("neg"), columns={"x": "int"}, size_limit="-3kb")
        with sluice.MDSWriter(out=self.path("a"), columns={"x": "int"}, size_limit="1kb") as w:
            for i in range(300):
                w.write({"x": i})
        idx = _index(self.path("a"))
        self.assertEqual(idx["shards"][0]["size_limit"], 1024)
        self.assertGreater(len(idx["shards"]), 1)

    def test_mosaicml_exceptions(self):
        out = self.path("b")
        with self.assertRaisesRegex(ValueError, "Invalid compression"):
            sluice.MDSWriter(out=out, columns={"x": "int"}, compression="lz5")
        with self.assertRaisesRegex(ValueError, "sorted order"):
            sluice.MDSWriter(out=out, columns={"x": "int"}, hashes=["xxh64", "sha1"])
        with self.assertRaisesRegex(ValueError, "Invalid hash"):
            sluice.MDSWriter(out=out, columns={"x": "int"}, hashes=["nohash"])
        with self.assertRaises(TypeError):
            sluice.MDSWriter(out=out, columns={"x": "complex128"})
        with self.assertRaisesRegex(ValueError, r"Invalid Writer argument\(s\): \['bogus'\]"):
            sluice.MDSWriter(out=out, columns={"x": "int"}, bogus=1)
        with self.assertRaisesRegex(ValueError, "allow_unsafe_types"):
            sluice.MDSWriter(out=out, columns={"x": "pkl"})
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "keep.txt"), "w") as f:
            f.write("mine")
        with self.assertRaisesRegex(FileExistsError, "Directory is not empty"):
            sluice.MDSWriter(out=out, columns={"x": "int"})
        # exist_ok writes into it and deletes nothing.
        with self.assertWarns(UserWarning):
            w = sluice.MDSWriter(out=out, columns={"x": "int"}, exist_ok=True)
        with w:
            w.write({"x": 1})
        self.assertTrue(os.path.exists(os.path.join(out, "keep.txt")))
        self.assertEqual(_index(out)["shards"][0]["samples"], 1)

    def test_bad_value_raises_names_sample_and_writer_goes_on(self):
        out = self.path("c")
        w = sluice.MDSWriter(out=out, columns={"n": "uint8", "s": "str"}, size_limit=None)
        w.write({"n": 1, "s": "a"})
        for i in range(2, 40):
            w.write({"n": i, "s": "x%d" % i})
        with self.assertRaisesRegex(ValueError, r"sample \d+: column 'n'"):
            w.write({"n": 300, "s": "too big"})
            for _ in range(100000):  # the error surfaces when the batch is sent
                w.write({"n": 7, "s": "later"})
        with self.assertRaises(KeyError):
            w.write({"n": 1})
            for _ in range(100000):
                w.write({"n": 7, "s": "later"})
        w.write({"n": 9, "s": "end"})
        w.finish()
        p = subprocess.run([helpers.binary(), "dump", out], stdout=subprocess.PIPE, check=True)
        vals = [json.loads(line)["cols"]["n"]["v"] for line in p.stdout.splitlines()]
        self.assertNotIn(300 % 256, vals[39:40])
        self.assertEqual(vals[:39], list(range(1, 40)))
        self.assertEqual(vals[-1], 9)

    def test_text_fast_path_and_fallbacks(self):
        # ASCII batches take the joined fast path; non-ASCII text, bytes
        # passed through and bytearrays take the per-value path.
        out = self.path("txt")
        vals = ["plain", "", "é中😀", b"raw bytes", "x" * 1000]
        with sluice.MDSWriter(out=out, columns={"s": "str", "b": "bytes"}) as w:
            for i in range(500):
                v = vals[i % len(vals)]
                w.write({"s": v, "b": bytearray(b"%d" % i) if i % 7 == 0 else b"%d" % i})
        p = subprocess.run([helpers.binary(), "dump", out], stdout=subprocess.PIPE, check=True)
        got = [json.loads(line)["cols"] for line in p.stdout.splitlines()]
        self.assertEqual(len(got), 500)
        for i, g in enumerate(got):
            v = vals[i % len(vals)]
            self.assertEqual(g["s"]["v"], v.decode() if isinstance(v, bytes) else v)
            self.assertEqual(g["b"]["v"]["b64"], __import__("base64").b64encode(b"%d" % i).decode())

    def test_tuple_out_keep_local_and_version(self):
        local, remote = self.path("loc"), self.path("rem")
        with sluice.MDSWriter(out=(local, "file://" + remote), columns={"x": "int"}, keep_local=True) as w:
            for i in range(10):
                w.write({"x": i})
        self.assertEqual(_read(os.path.join(local, "index.json")), _read(os.path.join(remote, "index.json")))
        local2, remote2 = self.path("loc2"), self.path("rem2")
        with sluice.MDSWriter(out=(local2, "file://" + remote2), columns={"x": "int"}) as w:
            w.write({"x": 1})
        self.assertFalse(os.path.exists(local2), "keep_local=False leaves the local copy")
        self.assertTrue(os.path.exists(os.path.join(remote2, "index.json")))
        self.assertEqual(sluice.__version__, w.stats and sluice.__version__)
        v = subprocess.run([helpers.binary(), "--version"], stdout=subprocess.PIPE, check=True).stdout.decode()
        self.assertTrue(v.startswith("sluice %s " % sluice.__version__), v)


class HandshakeVersionTest(WriterTestCase):
    def test_client_and_agent_of_different_releases_say_so(self):
        from sluice import _agent, _version

        d = self.path("agent")
        old = os.environ.get("SLUICE_AGENT_IDLE_TIMEOUT")
        os.environ["SLUICE_AGENT_IDLE_TIMEOUT"] = "10s"
        try:
            c = _agent.Connection(directory=d)
            self.assertEqual(c.software, "sluice-agent/" + sluice.__version__)
            c.close()
            real = _version.__version__
            _version.__version__ = "0.0.1-old"
            try:
                with self.assertWarnsRegex(UserWarning, r"release %s, this Python client is 0\.0\.1-old" % real):
                    c = _agent.Connection(directory=d)
                c.close()
            finally:
                _version.__version__ = real
        finally:
            helpers.stop_agent(d)
            if old is None:
                os.environ.pop("SLUICE_AGENT_IDLE_TIMEOUT", None)
            else:
                os.environ["SLUICE_AGENT_IDLE_TIMEOUT"] = old


class OtherFormatsTest(WriterTestCase):
    def test_json_csv_tsv_xsv(self):
        cols = {"id": "int", "name": "str", "score": "float"}
        samples = [{"id": i, "name": "n%d" % i, "score": i / 4} for i in range(50)]
        samples.append({"id": 1 << 70, "name": "big", "score": float("inf")})
        for cls, kw, line in [
            (sluice.JSONWriter, {}, b'{"id": 0, "name": "n0", "score": 0.0}\n'),
            (sluice.CSVWriter, {}, b"0,n0,0.0\n"),
            (sluice.TSVWriter, {}, b"0\tn0\t0.0\n"),
            (sluice.XSVWriter, {"separator": "|"}, b"0|n0|0.0\n"),
        ]:
            with self.subTest(writer=cls.__name__):
                out = self.path(cls.__name__)
                with cls(out=out, columns=cols, size_limit=512, **kw) as w:
                    for s in samples:
                        w.write(s)
                idx = _index(out)
                self.assertEqual(sum(s["samples"] for s in idx["shards"]), len(samples))
                first = _read(os.path.join(out, idx["shards"][0]["raw_data"]["basename"]))
                self.assertIn(line, first)
                p = subprocess.run([helpers.binary(), "dump", out], stdout=subprocess.PIPE, check=True)
                self.assertEqual(len(p.stdout.splitlines()), len(samples))
        # A CSV value holding the separator is refused and the writer goes on.
        w = sluice.CSVWriter(out=self.path("sep"), columns={"t": "str"})
        w.write({"t": "fine"})
        with self.assertRaisesRegex(ValueError, "separator"):
            w.write({"t": "a,b"})
            for _ in range(100000):
                w.write({"t": "more"})
        w.write({"t": "last"})
        w.finish()
        self.assertTrue(_index(self.path("sep"))["shards"])
        with self.assertRaisesRegex(ValueError, "int column takes int"):
            w = sluice.JSONWriter(out=self.path("bad"), columns={"id": "int"})
            w.write({"id": "seven"})
            w.finish()

    def test_merge_index_forms(self):
        root = self.path("m")
        for p in ("0", "1"):
            with sluice.MDSWriter(out=os.path.join(root, p), columns={"x": "int"}) as w:
                for i in range(5):
                    w.write({"x": i})
        sluice.merge_index(root)
        idx = _index(root)
        self.assertEqual([s["raw_data"]["basename"] for s in idx["shards"]], ["0/shard.00000.mds", "1/shard.00000.mds"])
        os.remove(os.path.join(root, "index.json"))
        sluice.merge_index([os.path.join(root, "1", "index.json"), os.path.join(root, "0", "index.json")], root)
        idx = _index(root)
        self.assertEqual([s["raw_data"]["basename"] for s in idx["shards"]], ["1/shard.00000.mds", "0/shard.00000.mds"])


_CHILD = textwrap.dedent("""
    import os, sys, time
    import sluice
    w = sluice.MDSWriter(out=sys.argv[1], columns={"id": "int", "blob": "bytes"}, size_limit=4096)
    print(w._proc.pid, flush=True)
    i = 0
    while True:
        w.write({"id": i, "blob": os.urandom(300)})
        i += 1
        if i % 2000 == 0:
            print("wrote", i, flush=True)
""")


class KillTest(WriterTestCase):
    """A writer killed with SIGKILL never leaves an index naming a missing
    or partial shard (in practice: no index.json at all)."""

    def _start_child(self, out):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        child = subprocess.Popen([sys.executable, "-c", _CHILD, out], stdout=subprocess.PIPE, env=env)
        go_pid = int(helpers.readline(child.stdout))
        deadline = time.monotonic() + 60
        while len([f for f in os.listdir(out) if f.startswith("shard.")]) < 5:
            self.assertLess(time.monotonic(), deadline, "no shards written")
            self.assertIsNone(child.poll())
            time.sleep(0.05)
        return child, go_pid

    def _gone(self, pid):
        deadline = time.monotonic() + 30
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    return
            except ChildProcessError:
                pass
            # a zombie of another parent counts as gone once it is reaped
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    return
            self.assertLess(time.monotonic(), deadline, "sluice write %d still runs" % pid)
            time.sleep(0.05)

    def test_sigkill_python_producer(self):
        out = self.path("k1")
        os.makedirs(out)
        child, go_pid = self._start_child(out)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        self._gone(go_pid)  # the pipe's EOF ends it
        self.assertFalse(_assert_index_sound(self, out), "index.json written by a killed writer")
        self.assertTrue([f for f in os.listdir(out) if f.startswith("shard.")])

    def test_sigkill_go_writer(self):
        out = self.path("k2")
        os.makedirs(out)
        child, go_pid = self._start_child(out)
        os.kill(go_pid, signal.SIGKILL)
        rc = child.wait(timeout=60)
        child.stdout.close()
        self.assertNotEqual(rc, 0, "the Python writer went on after its engine died")
        self.assertFalse(_assert_index_sound(self, out))
        # No temporary file is taken for a shard.
        for f in os.listdir(out):
            if f.startswith("shard.") and f.endswith(".mds"):
                self.assertGreater(os.path.getsize(os.path.join(out, f)), 0)


class S3Test(WriterTestCase):
    def test_write_to_s3(self):
        ep = os.environ.get("SLUICE_TEST_S3_ENDPOINT")
        bucket = os.environ.get("SLUICE_TEST_S3_BUCKET")
        if not ep or not bucket:
            if os.environ.get("SLUICE_REQUIRE_SERVICES") == "1":
                self.fail("no S3 server: SLUICE_TEST_S3_* unset")
            self.skipTest("no S3 server (run under .ci/with-services.sh)")
        env = {
            "S3_ENDPOINT_URL": ep,
            "AWS_ACCESS_KEY_ID": os.environ["SLUICE_TEST_S3_ACCESS_KEY"],
            "AWS_SECRET_ACCESS_KEY": os.environ["SLUICE_TEST_S3_SECRET_KEY"],
            "AWS_REGION": os.environ.get("SLUICE_TEST_S3_REGION") or "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            remote = "s3://%s/writer-test-%s" % (bucket, uuid.uuid4().hex)
            cols = {"id": "int", "text": "str", "arr": "ndarray:float32"}
            import numpy as np

            samples = [{"id": i, "text": "t%d" % i, "arr": np.arange(i % 7 + 1, dtype=np.float32)} for i in range(500)]
            local = self.path("local")
            for out in (remote, local):
                with sluice.MDSWriter(out=out, columns=cols, compression="zstd", hashes=["sha1"],
                                      size_limit="4kb", max_workers=4) as w:
                    for s in samples:
                        w.write(s)
                self.assertFalse(w._temp and os.path.exists(w.local), "temporary local dir left")
            back = self.path("back")
            subprocess.run([helpers.binary(), "cp", "--progress", "none", remote, back], check=True, stdout=subprocess.DEVNULL)
            self.assertEqual(sorted(os.listdir(back)), sorted(os.listdir(local)))
            self.assertEqual(_read(os.path.join(back, "index.json")), _read(os.path.join(local, "index.json")))
            subprocess.run([helpers.binary(), "verify", remote], check=True, stdout=subprocess.DEVNULL)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v



class AbandonTest(WriterTestCase):
    def test_unfinished_writer_writes_no_index(self):
        out = self.path("ab")
        w = sluice.MDSWriter(out=out, columns={"b": "bytes"}, size_limit=1024)
        for _ in range(200):
            w.write({"b": b"x" * 100})
        proc = w._proc
        del w  # dropped without finish()
        import gc

        gc.collect()
        self.assertIsNotNone(proc.wait(timeout=30))
        self.assertFalse(os.path.exists(os.path.join(out, "index.json")))
        self.assertTrue([f for f in os.listdir(out) if f.startswith("shard.")])


if __name__ == "__main__":
    unittest.main()
