"""Shared set-up of the client tests: the sluice binary, an isolated agent
directory per test class, datasets, and the plan computed by `sluice plan`."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
if os.path.join(ROOT, "python") not in sys.path and not os.environ.get("SLUICE_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "python"))

import mdswrite  # noqa: E402


def build_binary(name, tags=(), env=None):
    """Builds ./cmd/sluice of this checkout into a directory of its own under
    the temp dir and returns the binary's path. The directory is keyed by the
    checkout's path, and go build runs every time (its cache makes an
    up-to-date build a no-op), so a binary built from another checkout or
    from older sources is never used. The build goes to a temporary name and
    is renamed into place, so concurrent test processes never run a
    half-written file."""
    import hashlib
    key = hashlib.sha256(ROOT.encode()).hexdigest()[:12]
    out_dir = os.path.join(tempfile.gettempdir(), "sluice-test-bin", key)
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, name)
    tmp = "%s.%d.tmp" % (out, os.getpid())
    cmd = ["go", "build"] + (["-tags", ",".join(tags)] if tags else []) + ["-o", tmp, "./cmd/sluice"]
    try:
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, timeout=600)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def binary():
    b = os.environ.get("SLUICE_BIN")
    if b:
        return b
    out = build_binary("sluice")
    os.environ["SLUICE_BIN"] = out
    return out


def write_ids(directory, n, size_limit=1 << 11, text=True):
    """n samples {id: i, text: "sample i ..."}: small shards."""
    cols = {"id": "int", "text": "str"} if text else {"id": "int"}
    samples = ({"id": i, "text": "sample %d %s" % (i, "x" * (i % 13))} for i in range(n))
    return mdswrite.write(directory, cols, samples, size_limit=size_limit)


class AgentCase(unittest.TestCase):
    """Gives each test class its own agent directory and scratch space and
    stops the agent it started afterwards."""

    idle = "20s"

    @classmethod
    def setUpClass(cls):
        binary()
        cls.tmp = tempfile.mkdtemp(prefix="sluice-pytest-")
        cls.agent_dir = os.path.join(cls.tmp, "agent")
        cls._env = {k: os.environ.get(k) for k in ("SLUICE_AGENT_DIR", "SLUICE_AGENT_IDLE_TIMEOUT")}
        os.environ["SLUICE_AGENT_DIR"] = cls.agent_dir
        os.environ["SLUICE_AGENT_IDLE_TIMEOUT"] = cls.idle

    @classmethod
    def tearDownClass(cls):
        stop_agent(cls.agent_dir)
        for k, v in cls._env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(cls.tmp, ignore_errors=True)


def agent_pid(agent_dir):
    """The pid of the agent holding the lock of agent_dir, or None."""
    import fcntl

    path = os.path.join(agent_dir, "agent.lock")
    try:
        f = open(path, "r+")
    except FileNotFoundError:
        return None
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            txt = f.read().strip()
            return int(txt) if txt else None
        fcntl.flock(f, fcntl.LOCK_UN)
        return None


def agent_cpu(agent_dir):
    """CPU seconds (user + system) the agent of agent_dir has used so far;
    0.0 when there is no agent or its /proc entry cannot be read."""
    pid = agent_pid(agent_dir)
    if pid is None:
        return 0.0
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_with_agent(agent_dir):
    """CPU seconds of this process, its waited-for children and the agent of
    agent_dir together (what a benchmark charges a read path)."""
    import resource

    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime + agent_cpu(agent_dir)


def readline(stream, timeout=120):
    """One line from a child's stdout, with a deadline: a child that fails
    while its own children (DataLoader workers, an agent) hold the pipe
    open never gives EOF, and a bare readline() would hang the suite."""
    import threading

    got = []
    t = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if not got:
        raise AssertionError("no line from the child within %ds" % timeout)
    return got[0]


def stop_agent(agent_dir, sig=signal.SIGTERM, timeout=10):
    pid = agent_pid(agent_dir)
    if pid is None:
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while agent_pid(agent_dir) == pid and time.monotonic() < deadline:
        time.sleep(0.02)


def plan_work(dataset, batch_size, nodes=1, ranks_per_node=1, workers=1, epoch=0, sample_in_epoch=0,
              initial_physical_nodes=0, shuffle=True, ncn=None, seed=None):
    """`sluice plan --json` for the dataset: (shape, flat work)."""
    cmd = [binary(), "plan", dataset, "--json", "--batch-size", str(batch_size), "--nodes", str(nodes),
           "--ranks-per-node", str(ranks_per_node), "--workers-per-rank", str(workers), "--epoch", str(epoch),
           "--sample-in-epoch", str(sample_in_epoch), "--initial-physical-nodes", str(initial_physical_nodes)]
    if shuffle:
        cmd.append("--shuffle")
    if ncn:
        cmd += ["--num-canonical-nodes", str(ncn)]
    if seed is not None:
        cmd += ["--shuffle-seed", str(seed)]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout
    doc = json.loads(out)
    return doc["work_shape"], doc["work"]


def rank_batches(shape, work, rank, batch_size):
    """Batches an in-order torch DataLoader yields on a global rank: each
    worker's ids (padding dropped) cut into batches, taken round-robin."""
    P, R, W, nb, B = shape
    node, r = divmod(rank, R)
    per_worker = []
    for w in range(W):
        base = (((node * R) + r) * W + w) * nb * B
        ids = [x for x in work[base : base + nb * B] if x >= 0]
        per_worker.append([ids[i : i + batch_size] for i in range(0, len(ids), batch_size)])
    out = []
    t = 0
    while any(per_worker):
        for w in range(W):
            if per_worker[w]:
                out.append(per_worker[w].pop(0))
        t += 1
    return out


def worker_ids(shape, work, rank, worker):
    P, R, W, nb, B = shape
    node, r = divmod(rank, R)
    base = (((node * R) + r) * W + worker) * nb * B
    return [x for x in work[base : base + nb * B] if x >= 0]


def shm_names():
    try:
        return set(os.listdir("/dev/shm"))
    except FileNotFoundError:
        return set()


def s3_env(test):
    """The real S3 server of .ci/services.sh (SLUICE_TEST_S3_*) as (bucket,
    the environment a job reads it with). Skips the test without one, and
    fails it under SLUICE_REQUIRE_SERVICES=1 (CI)."""
    ep = os.environ.get("SLUICE_TEST_S3_ENDPOINT")
    bucket = os.environ.get("SLUICE_TEST_S3_BUCKET")
    if not ep or not bucket:
        if os.environ.get("SLUICE_REQUIRE_SERVICES") == "1":
            test.fail("no S3 server: SLUICE_TEST_S3_* unset")
        raise unittest.SkipTest("no S3 server (run under .ci/with-services.sh)")
    return bucket, {
        "S3_ENDPOINT_URL": ep,
        "AWS_ACCESS_KEY_ID": os.environ["SLUICE_TEST_S3_ACCESS_KEY"],
        "AWS_SECRET_ACCESS_KEY": os.environ["SLUICE_TEST_S3_SECRET_KEY"],
        "AWS_REGION": os.environ.get("SLUICE_TEST_S3_REGION") or "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def set_env(test, env):
    """Sets env in os.environ for the rest of test (restored at cleanup)."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)

    def restore():
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    test.addCleanup(restore)


def upload_s3(test, src, name, env):
    """Copies directory src to a fresh prefix s3://BUCKET/NAME-RANDOM with
    `sluice cp` and returns its URL; env is s3_env's."""
    import uuid

    bucket, env = env
    url = "s3://%s/%s-%s" % (bucket, name, uuid.uuid4().hex)
    subprocess.run([binary(), "cp", "--progress", "none", src, url], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, **env), timeout=120)
    return url
