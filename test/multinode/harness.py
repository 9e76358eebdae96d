"""Multi-host harness: simulated hosts (network namespaces on a bridge), each
with its own agent, cache and agent socket directories; the real S3 server
(versitygw) on a host of its own; real torchrun (c10d rendezvous, gloo)
across the hosts, with DataLoader workers. Run as root by run.sh.

Scenarios, each with assertions (a failed one exits non-zero):
  clean      every sample once per epoch across all ranks (plus MosaicML's
             padding), each rank's batches exactly `sluice plan --json`'s;
             equal batch counts per rank with one rank slower than the rest
             and a sample count no world divides (no hang at the epoch's
             end: every step is an all_reduce); each host downloads each
             shard it needs exactly once (S3 access log, by the host's
             address) and no other.
  kill       a host SIGKILLed mid-epoch (everything in its namespace: its
             torchrun, ranks, workers and agent); the job restarted from the
             last state_dict() on fewer and on more hosts; the consumed and
             the resumed samples are the epoch, each sample exactly once.
  replication  replication across hosts: groups of ranks spanning hosts see
             identical batches, the groups together each sample once.

The last line printed is the figures line.
"""

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))

import netns  # noqa: E402

ACCESS, SECRET, REGION, BUCKET = "mnaccess", "mnsecret", "sluice-mn-1", "sluice-mn"
EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


class Failure(AssertionError):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def log(msg):
    print("multinode: " + msg, flush=True)


class Cluster:
    def __init__(self, args):
        self.args = args
        self.work = args.work
        self.bin = args.sluice
        tag = os.getpid() % 200 + 20
        self.net = netns.Network(args.prefix, "10.%d.%d" % (231, tag))
        self.procs = []
        self.s3 = self.net.add_host("s3", 2)
        self.hosts = [self.net.add_host("mnh%d" % i, 11 + i) for i in range(args.max_hosts)]
        self.net.write_hosts_files()
        self.endpoint = "http://%s:9000" % self.s3.addr

    # -- processes --------------------------------------------------------

    def spawn(self, host, argv, logname, env=None, hostname=True):
        f = open(os.path.join(self.work, logname), "ab")
        p = subprocess.Popen(host.cmd(argv, hostname=hostname), stdout=f, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        f.close()
        self.procs.append(p)
        return p

    def host_env(self, host, extra=None):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.path.join(self.work, host.name),
            "TMPDIR": os.path.join(self.work, host.name, "tmp"),
            "PYTHONPATH": os.path.join(ROOT, "python"),
            "SLUICE_BIN": self.bin,
            "SLUICE_AGENT_DIR": os.path.join(self.work, host.name, "agent"),
            "SLUICE_MN_HOST": host.name,
            "S3_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
            "GLOO_SOCKET_IFNAME": "eth0",
            "OMP_NUM_THREADS": "1",
            "PYTHONWARNINGS": "ignore",
        }
        env.update(extra or {})
        return env

    def run_in(self, host, argv, timeout=120):
        p = subprocess.run(host.cmd(argv, hostname=False), env=self.host_env(host), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError("%s on %s: exit %d: %s" % (" ".join(argv), host.name, p.returncode, p.stdout.decode(errors="replace")))
        return p.stdout.decode()

    # -- S3 ---------------------------------------------------------------

    def start_s3(self):
        data = os.path.join(self.work, "s3", "data")
        os.makedirs(data)
        self.access_log = os.path.join(self.work, "s3", "access.log")
        gw = os.path.join(ROOT, ".tools", "versitygw-v1.8.0", "versitygw")
        self.spawn(self.s3, [gw, "--access", ACCESS, "--secret", SECRET, "--region", REGION,
                             "--port", "%s:9000" % self.s3.addr, "--keep-alive", "--quiet",
                             "--access-log", self.access_log, "posix", data], "s3.log", hostname=False)
        h = self.hosts[0]
        deadline = time.monotonic() + 60
        while True:
            p = subprocess.run(h.cmd(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2",
                                      self.endpoint + "/"], hostname=False), stdout=subprocess.PIPE)
            if p.stdout.strip() not in (b"", b"000"):
                break
            check(time.monotonic() < deadline, "S3 server did not answer at %s within 60s" % self.endpoint)
            time.sleep(0.2)
        code = self.run_in(h, ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT",
                               "--aws-sigv4", "aws:amz:%s:s3" % REGION, "-H", "x-amz-content-sha256: " + EMPTY_SHA,
                               "--user", "%s:%s" % (ACCESS, SECRET), "%s/%s" % (self.endpoint, BUCKET)])
        check(code.strip() == "200", "creating bucket %s: HTTP %s" % (BUCKET, code))

    def s3_gets(self, prefix):
        """{client address: Counter(object key)} of GetObject requests under
        prefix, from the server's access log."""
        out = collections.defaultdict(collections.Counter)
        # bucket-owner bucket [time] remote-ip requester id operation key uri status ...
        pat = re.compile(r"^\S+ \S+ \[[^\]]*\] (\S+) \S+ \S+ s3_GetObject (\S+) \S+ 20[06] ")
        with open(self.access_log) as f:
            for line in f:
                m = pat.match(line)
                if m and m.group(2).startswith(prefix):
                    out[m.group(1)][m.group(2)[len(prefix):]] += 1
        return out

    # -- agents -----------------------------------------------------------

    def fresh_host_dirs(self, host):
        """A host's own cache, agent and scratch directories, emptied (a
        restarted node comes back with a fresh disk)."""
        host.kill_all()
        deadline = time.monotonic() + 10
        while host.pids():
            check(time.monotonic() < deadline, "processes of %s survive SIGKILL: %s" % (host.name, host.pids()))
            time.sleep(0.05)
        d = os.path.join(self.work, host.name)
        shutil.rmtree(d, ignore_errors=True)
        for sub in ("agent", "cache", "tmp"):
            os.makedirs(os.path.join(d, sub))

    def start_agent(self, host):
        env = self.host_env(host)
        self.spawn(host, [self.bin, "agent", "--dir", env["SLUICE_AGENT_DIR"], "--idle-timeout", "-1s"],
                   "%s-agent.log" % host.name, env=env, hostname=False)
        sock = os.path.join(env["SLUICE_AGENT_DIR"], "agent.sock")
        deadline = time.monotonic() + 30
        while not os.path.exists(sock):
            check(time.monotonic() < deadline, "agent of %s did not create %s" % (host.name, sock))
            time.sleep(0.05)

    def agent_stats(self, host):
        from sluice import _agent

        c = _agent.Connection(os.path.join(self.work, host.name, "agent"), timeout=10, start=False)
        try:
            return c.call({"op": "stats"}, "stats")
        finally:
            c.close()

    # -- torchrun ---------------------------------------------------------

    def launch(self, name, hosts, cfg):
        """Starts torchrun on each host of hosts for one job; returns the
        torchrun processes and the job's output directory."""
        out = os.path.join(self.work, name)
        os.makedirs(out)
        cfg = dict(cfg, out=out)
        cfg_path = os.path.join(out, "cfg.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        rdzv = "%s:29400" % hosts[0].addr
        procs = []
        for h in hosts:
            cfg_host = dict(cfg, local=os.path.join(self.work, h.name, "cache", cfg["remote"].rstrip("/").rsplit("/", 1)[-1]))
            p_host = os.path.join(out, "cfg-%s.json" % h.name)
            with open(p_host, "w") as f:
                json.dump(cfg_host, f)
            argv = ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes", str(len(hosts)),
                    "--nproc_per_node", str(self.args.ranks), "--rdzv_backend", "c10d", "--rdzv_endpoint", rdzv,
                    "--rdzv_id", name, "--max_restarts", "0", "--monitor_interval", "1",
                    # Debian's torch 1.13 on Python 3.11 cannot parse the
                    # default "0" of --redirects/--tee (Std.NONE is not
                    # iterated any more); 1 and 2 are single flags and work.
                    "--log_dir", os.path.join(out, "torchrun-" + h.name), "--redirects", "1", "--tee", "2",
                    os.path.join(HERE, "train.py"), p_host]
            procs.append(self.spawn(h, argv, "%s-%s.log" % (name, h.name), env=self.host_env(h)))
        return procs, out

    def wait(self, procs, name, timeout):
        deadline = time.monotonic() + timeout
        codes = []
        for p in procs:
            left = deadline - time.monotonic()
            try:
                codes.append(p.wait(timeout=max(left, 0.1)))
            except subprocess.TimeoutExpired:
                for q in procs:
                    try:
                        os.killpg(q.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                raise Failure("job %s did not finish within %ds (a hang?); logs in %s" % (name, timeout, self.work))
        return codes

    def kill_group(self, p):
        """SIGKILLs the process group a spawn started and reaps it."""
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=30)

    def results(self, out, world):
        res = []
        for r in range(world):
            with open(os.path.join(out, "rank-%d.json" % r)) as f:
                res.append(json.load(f))
        return res

    def logged(self, out, world):
        """rank → [(epoch, step, ids)] from the batch logs."""
        res = {}
        for r in range(world):
            rows = []
            path = os.path.join(out, "batches-%d.jsonl" % r)
            if os.path.exists(path):
                with open(path) as f:
                    for line in f:
                        if line.endswith("\n"):
                            d = json.loads(line)
                            rows.append((d["epoch"], d["step"], d["ids"]))
            res[r] = rows
        return res

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.net.cleanup()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
