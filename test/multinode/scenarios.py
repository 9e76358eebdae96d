"""The harness's scenarios and their assertions (see harness.py)."""

import collections
import json
import os
import time

import helpers  # python/tests/helpers.py: sluice plan --json, in-order DataLoader batches

from harness import check, log


class Dataset:
    """A dataset written locally, uploaded to S3 under prefix."""

    def __init__(self, cluster, name, n, size_limit):
        self.name, self.n = name, n
        self.local = os.path.join(cluster.work, "datasets", name)
        helpers.write_ids(self.local, n, size_limit=size_limit)
        self.prefix = "datasets/%s/" % name
        self.remote = "s3://%s/datasets/%s" % (cluster_bucket(), name)
        cluster.run_in(cluster.hosts[0], [cluster.bin, "cp", self.local, self.remote], timeout=300)
        with open(os.path.join(self.local, "index.json")) as f:
            shards = json.load(f)["shards"]
        self.shard_names, self.shard_bytes, self.starts = [], [], []
        start = 0
        for s in shards:
            self.shard_names.append(s["raw_data"]["basename"])
            self.shard_bytes.append(s["raw_data"]["bytes"])
            self.starts.append(start)
            start += s["samples"]
        check(start == n, "index of %s holds %d samples, wrote %d" % (name, start, n))

    def shard_of(self, sample):
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= sample:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def plan(self, batch, nodes, rpn, workers, epoch=0, **kw):
        shape, work = helpers.plan_work(self.local, batch, nodes=nodes, ranks_per_node=rpn, workers=workers, epoch=epoch, **kw)
        return shape, work


def cluster_bucket():
    from harness import BUCKET

    return BUCKET


def flat(batches):
    return [x for b in batches for x in b]


def base_cfg(args, ds, **kw):
    cfg = {"remote": ds.remote, "batch_size": args.batch, "workers": args.workers, "timeout": 120}
    cfg.update(kw)
    return cfg


def clean(cluster, args, ds):
    """Every sample once per epoch, each rank = the plan, equal batch counts
    with a slow rank, each host downloads each needed shard once."""
    hosts = cluster.hosts[: args.hosts]
    for h in hosts:
        cluster.fresh_host_dirs(h)
        cluster.start_agent(h)
    world = args.hosts * args.ranks
    t0 = time.monotonic()
    procs, out = cluster.launch("clean", hosts, base_cfg(args, ds, epochs=args.epochs, slow_rank=1, slow_ms=args.slow_ms))
    codes = cluster.wait(procs, "clean", args.job_timeout)
    wall = time.monotonic() - t0
    check(codes == [0] * len(hosts), "clean run: torchrun exit codes %s (logs in %s)" % (codes, cluster.work))
    res = cluster.results(out, world)
    needed = collections.defaultdict(set)  # host → shard indices its ranks read
    for epoch in range(args.epochs):
        shape, work = ds.plan(args.batch, args.hosts, args.ranks, args.workers, epoch=epoch)
        want_all = [x for x in work if x >= 0]
        seen = []
        counts = set()
        for r in range(world):
            got = res[r]["epochs"][epoch]
            want = helpers.rank_batches(shape, work, r, args.batch)
            check(got == want, "clean: epoch %d rank %d: batches differ from `sluice plan --json` (first %s vs %s)"
                  % (epoch, r, got[:1], want[:1]))
            counts.add(len(got))
            seen += flat(got)
            for x in flat(got):
                needed[res[r]["host"]].add(ds.shard_of(x))
        check(sorted(seen) == sorted(want_all), "clean: epoch %d: samples over all ranks differ from the plan" % epoch)
        check(set(seen) == set(range(ds.n)), "clean: epoch %d: %d distinct samples of %d" % (epoch, len(set(seen)), ds.n))
        pad = len(seen) - ds.n
        check(pad < world * args.batch, "clean: epoch %d: %d repeated samples, more than MosaicML's padding" % (epoch, pad))
        check(len(counts) == 1, "clean: epoch %d: ranks yield different batch counts %s (a hang at the epoch end)" % (epoch, sorted(counts)))
    # Downloads: from the S3 server's access log, by client address.
    gets = cluster.s3_gets(ds.prefix)
    per_host = []
    for h in hosts:
        g = gets.get(h.addr, collections.Counter())
        shards = collections.Counter({k: v for k, v in g.items() if k.endswith(".mds")})
        want = {ds.shard_names[i] for i in needed[h.name]}
        twice = {k: v for k, v in shards.items() if v > 1}
        check(not twice, "clean: host %s downloaded shards more than once: %s" % (h.name, sorted(twice.items())[:5]))
        check(set(shards) == want, "clean: host %s downloaded %d shards, needed %d (extra %s, missing %s)"
              % (h.name, len(shards), len(want), sorted(set(shards) - want)[:5], sorted(want - set(shards))[:5]))
        st = cluster.agent_stats(h)
        check(st.get("downloads") == len(want), "clean: agent of %s reports %s downloads, the server saw %d"
              % (h.name, st.get("downloads"), len(want)))
        per_host.append((len(shards), sum(ds.shard_bytes[ds.shard_names.index(k)] for k in shards)))
    samples = sum(r["samples"] for r in res)
    loop = max(r["elapsed_s"] for r in res)
    log("clean: %d hosts × %d ranks × %d workers, %d epochs of %d samples: every rank = sluice plan, "
        "each sample once per epoch (+%d padding), %d batches per rank, downloads per host %s of %d shards"
        % (args.hosts, args.ranks, args.workers, args.epochs, ds.n, pad, counts.pop(),
           [d for d, _ in per_host], len(ds.shard_names)))
    return {"samples": samples, "loop_s": loop, "wall_s": wall, "per_host": per_host,
            "first_batch_s": max(r["first_batch_s"] for r in res)}


def kill_and_resume(cluster, args, ds):
    """A host SIGKILLed mid-epoch; the job resumes from the last state_dict
    on fewer and on more hosts."""
    hosts = cluster.hosts[: args.hosts]
    for h in hosts:
        cluster.fresh_host_dirs(h)
        cluster.start_agent(h)
    world = args.hosts * args.ranks
    steps_total = ds.n // world // args.batch
    procs, out = cluster.launch("kill", hosts, base_cfg(args, ds, ckpt_every=2, slow_rank=-1, step_ms=args.step_ms, pg_timeout=30))
    ckpt = os.path.join(out, "ckpt.json")
    deadline = time.monotonic() + args.job_timeout
    target = max(steps_total // 3, 2)
    while True:
        step = 0
        if os.path.exists(ckpt):
            with open(ckpt) as f:
                step = json.load(f)["step"]
        if step >= target:
            break
        check(all(p.poll() is None for p in procs), "kill: a host's torchrun ended before the checkpoint at step %d" % target)
        check(time.monotonic() < deadline, "kill: no checkpoint at step %d within %ds" % (target, args.job_timeout))
        time.sleep(0.02)
    victim = hosts[-1]
    killed = victim.kill_all()
    log("kill: SIGKILLed %d processes of %s (torchrun, ranks, workers, agent) after step %d of %d" % (len(killed), victim.name, step, steps_total))
    # The survivors' ranks must fail (gloo sees the peer gone), not hang.
    # Their torchrun agents then wait up to 300s in torchrun's exit barrier
    # for the dead node; the job's end is the scheduler's business, so the
    # harness tears them down once every surviving rank has failed.
    deadline = time.monotonic() + 90
    for h in hosts[:-1]:
        path = os.path.join(cluster.work, "kill-%s.log" % h.name)
        while True:
            with open(path, errors="replace") as f:
                text = f.read()
            if text.count("failed (exitcode") >= 1 or procs[hosts.index(h)].poll() is not None:
                break
            check(time.monotonic() < deadline, "kill: ranks on %s did not fail within 90s of %s's death (a hang)" % (h.name, victim.name))
            time.sleep(0.1)
    for p in procs:
        cluster.kill_group(p)
    with open(ckpt) as f:
        state = json.load(f)
    s = state.pop("step")
    check(state["sample_in_epoch"] == s * args.batch * world,
          "kill: checkpoint at step %d says sample_in_epoch %d, want %d" % (s, state["sample_in_epoch"], s * args.batch * world))
    check(s < steps_total, "kill: the checkpoint is at the epoch's end (step %d of %d); nothing left to resume" % (s, steps_total))
    logged = cluster.logged(out, world)
    consumed = []
    for r in range(world):
        rows = [ids for (e, st, ids) in logged[r] if e == 0 and st <= s]
        check(len(rows) == s, "kill: rank %d logged %d batches up to the checkpoint at step %d" % (r, len(rows), s))
        consumed += flat(rows)
    state_path = os.path.join(out, "state.json")
    with open(state_path, "w") as f:
        json.dump(state, f)
    summary = {"killed_at": s, "steps": steps_total}
    for label, n in (("fewer", args.hosts - 1), ("more", args.hosts + 1)):
        rhosts = cluster.hosts[:n]
        for h in rhosts:
            # The dead host and any new one come back with fresh disks and
            # a new agent; the survivors keep theirs.
            if h is victim or h not in hosts:
                cluster.fresh_host_dirs(h)
                cluster.start_agent(h)
        name = "resume-" + label
        rworld = n * args.ranks
        # MosaicML keeps the global batch on resumption: each rank's batch
        # is the global batch over the new world.
        gbatch = args.batch * world
        check(gbatch % rworld == 0, "%s: global batch %d does not divide over %d ranks (choose --batch)" % (name, gbatch, rworld))
        rbatch = gbatch // rworld
        procs, rout = cluster.launch(name, rhosts, base_cfg(args, ds, resume=state_path, batch_size=rbatch))
        codes = cluster.wait(procs, name, args.job_timeout)
        check(codes == [0] * n, "%s: torchrun exit codes %s" % (name, codes))
        res = cluster.results(rout, rworld)
        shape, work = ds.plan(rbatch, n, args.ranks, args.workers, epoch=0, sample_in_epoch=state["sample_in_epoch"],
                              initial_physical_nodes=state["initial_physical_nodes"], ncn=state["num_canonical_nodes"])
        resumed = []
        for r in range(rworld):
            got = res[r]["epochs"][0]
            check(got == helpers.rank_batches(shape, work, r, rbatch),
                  "%s: rank %d: batches differ from `sluice plan --json --sample-in-epoch %d`" % (name, r, state["sample_in_epoch"]))
            resumed += flat(got)
        both = consumed + resumed
        dup = [x for x, c in collections.Counter(both).items() if c > 1]
        missing = set(range(ds.n)) - set(both)
        check(not dup and not missing, "%s: %d samples repeated, %d lost (e.g. %s %s)"
              % (name, len(dup), len(missing), dup[:5], sorted(missing)[:5]))
        log("%s: resumed on %d hosts (%d ranks, batch %d) from sample %d: consumed %d + resumed %d = %d samples, each exactly once"
            % (name, n, rworld, rbatch, state["sample_in_epoch"], len(consumed), len(resumed), len(both)))
        summary[label] = n
    return summary


def replication(cluster, args, ds, k):
    """Groups of k consecutive ranks (spanning hosts) read the same samples."""
    hosts = cluster.hosts[: args.hosts]
    world = args.hosts * args.ranks
    for h in hosts:
        if not os.path.exists(os.path.join(cluster.work, h.name, "agent", "agent.sock")):
            cluster.fresh_host_dirs(h)
            cluster.start_agent(h)
    procs, out = cluster.launch("replication", hosts, base_cfg(args, ds, replication=k))
    codes = cluster.wait(procs, "replication", args.job_timeout)
    check(codes == [0] * len(hosts), "replication: torchrun exit codes %s" % codes)
    res = cluster.results(out, world)
    pranks = world // k
    pnodes = pranks // args.ranks if pranks % args.ranks == 0 else 1
    shape, work = ds.plan(args.batch, pnodes, pranks // pnodes, args.workers, epoch=0)
    seen = []
    spans = 0
    for g in range(pranks):
        members = list(range(g * k, (g + 1) * k))
        want = helpers.rank_batches(shape, work, g, args.batch)
        for r in members:
            check(res[r]["epochs"][0] == want, "replication: rank %d (group %d) differs from the plan's parallel rank %d" % (r, g, g))
        if len({res[r]["host"] for r in members}) > 1:
            spans += 1
        seen += flat(want)
    check(spans > 0, "replication: no group spans two hosts; the scenario tests nothing across nodes")
    check(sorted(seen) == list(range(ds.n)), "replication: the groups together do not see each sample exactly once")
    log("replication %d: %d groups (%d spanning hosts), identical batches within each, each sample once across groups" % (k, pranks, spans))
    return {"groups": pranks, "spanning": spans}
