"""Entry point of the multi-node harness (run.sh runs it as root).

    main.py --sluice BIN --work DIR [--hosts 3 --ranks 2 --workers 2 ...]
    main.py --big ...   the larger run whose figures the notes quote

Ends with one line of figures; exits 1 when an assertion fails.
"""

import argparse
import os
import sys
import time
import traceback

import harness
import scenarios


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True, help="the sluice binary")
    ap.add_argument("--work", required=True, help="scratch directory (hosts' disks, logs)")
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=2, help="ranks per host (torchrun --nproc_per_node)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--samples", type=int, default=3001, help="samples of the clean run's dataset (no world divides it)")
    ap.add_argument("--kill-samples", type=int, default=2400, help="samples of the kill/replication dataset")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--shard-bytes", type=int, default=1 << 12)
    ap.add_argument("--slow-ms", type=int, default=10, help="per-batch sleep of the slow rank in the clean run")
    ap.add_argument("--step-ms", type=int, default=40, help="per-batch sleep of every rank in the kill run")
    ap.add_argument("--job-timeout", type=int, default=240)
    ap.add_argument("--prefix", default="slmn%d" % os.getpid(), help="name prefix of the namespaces it creates")
    ap.add_argument("--big", action="store_true", help="4 hosts × 2 ranks × 2 workers, 50k samples (sized for a 2-core machine)")
    ap.add_argument("--only", default="", help="comma-separated scenarios (clean,kill,replication)")
    a = ap.parse_args()
    if a.big:
        a.hosts, a.ranks, a.workers, a.samples, a.kill_samples = 4, 2, 2, 50001, 19200
        # batch 15: the global batch 120 divides over 6, 8 and 10 ranks.
        a.batch, a.shard_bytes, a.step_ms, a.slow_ms, a.job_timeout = 15, 1 << 13, 10, 2, 900
    a.max_hosts = a.hosts + 1
    return a


def main():
    args = parse()
    os.environ["SLUICE_BIN"] = args.sluice
    only = set(filter(None, args.only.split(",")))
    want = lambda s: not only or s in only  # noqa: E731
    t0 = time.monotonic()
    cluster = harness.Cluster(args)
    fig = {}
    try:
        cluster.start_s3()
        harness.log("S3 (versitygw) on %s at %s; hosts %s" % (cluster.s3.name, cluster.endpoint,
                    ", ".join("%s=%s" % (h.name, h.addr) for h in cluster.hosts)))
        if want("clean"):
            ds = scenarios.Dataset(cluster, "uneven", args.samples, args.shard_bytes)
            fig["clean"] = scenarios.clean(cluster, args, ds)
        if want("kill") or want("replication"):
            ds2 = scenarios.Dataset(cluster, "even", args.kill_samples, args.shard_bytes)
            if want("kill"):
                fig["kill"] = scenarios.kill_and_resume(cluster, args, ds2)
            if want("replication"):
                world = args.hosts * args.ranks
                # The smallest group size larger than a host: groups span hosts.
                k = next(d for d in range(args.ranks + 1, world + 1) if world % d == 0)
                fig["replication"] = scenarios.replication(cluster, args, ds2, k)
    except AssertionError as e:
        print("multinode: FAIL: %s" % e, flush=True)
        return 1
    except Exception:
        traceback.print_exc()
        print("multinode: FAIL: harness error (logs under %s)" % args.work, flush=True)
        return 1
    finally:
        cluster.cleanup()
        left = harness.netns.leftover_namespaces(cluster.net.prefix)
        if left:
            print("multinode: FAIL: namespaces left behind: %s" % left, flush=True)
    parts = ["multinode figures: %d hosts × %d ranks × %d workers" % (args.hosts, args.ranks, args.workers)]
    c = fig.get("clean")
    if c:
        parts.append("%d samples in %.1fs = %.0f samples/s (first batch %.2fs)" % (c["samples"], c["loop_s"], c["samples"] / c["loop_s"], c["first_batch_s"]))
        parts.append("downloads per host %s shards, %s KiB" % ([d for d, _ in c["per_host"]], [b // 1024 for _, b in c["per_host"]]))
    k = fig.get("kill")
    if k:
        parts.append("killed at step %d/%d, resumed on %d and %d hosts exactly" % (k["killed_at"], k["steps"], k["fewer"], k["more"]))
    r = fig.get("replication")
    if r:
        parts.append("replication: %d groups, %d across hosts" % (r["groups"], r["spanning"]))
    parts.append("total %.0fs" % (time.monotonic() - t0))
    print("; ".join(parts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
