"""One rank of the multi-node harness, started by torchrun on each simulated
host (network namespace). argv[1] is a JSON file:

  remote, local        the dataset on S3 and this host's cache directory
  batch_size, workers  per-rank batch size, DataLoader workers
  replication          MosaicML's replication (null: none)
  out                  directory for rank-<RANK>.json, batches-<RANK>.jsonl
                       (one line per batch, written as it arrives) and
                       the checkpoint
  resume               a state dict file to resume from (optional)
  ckpt_every           rank 0 writes the loader's state_dict() every this
                       many steps to out/ckpt.json (0: never)
  slow_rank            this global rank sleeps slow_ms per batch (uneven
                       local work)
  step_ms              every rank sleeps this long per batch (a training
                       step's compute)
  epochs               epochs to run (default 1)

Each step ends with an all_reduce over gloo, as a training step's gradient
sync would: a rank with fewer batches than the others hangs the job there,
which the process group's timeout turns into a failure.
"""

import datetime
import json
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist

import sluice


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def main():
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=cfg.get("pg_timeout", 60)))
    rank, world = dist.get_rank(), dist.get_world_size()
    t0 = time.monotonic()
    ds = sluice.StreamingDataset(
        remote=cfg["remote"],
        local=cfg["local"],
        batch_size=cfg["batch_size"],
        shuffle=True,
        replication=cfg.get("replication"),
        timeout=cfg.get("timeout", 60),
    )
    loader = sluice.StreamingDataLoader(ds, batch_size=cfg["batch_size"], num_workers=cfg["workers"])
    if cfg.get("resume"):
        with open(cfg["resume"]) as f:
            loader.load_state_dict(json.load(f))
    slow = cfg.get("slow_rank", -1) == rank
    every = cfg.get("ckpt_every", 0)
    epochs, samples, first_batch = [], 0, None
    # Every batch is logged as it arrives (before the step's sync), so
    # that a node killed mid-epoch leaves the record of what it consumed.
    log = open(os.path.join(cfg["out"], "batches-%d.jsonl" % rank), "a", buffering=1)
    for epoch in range(cfg.get("epochs", 1)):
        batches = []
        for b in loader:
            if first_batch is None:
                first_batch = time.monotonic() - t0
            ids = [int(x) for x in b["id"]]
            batches.append(ids)
            log.write(json.dumps({"epoch": epoch, "step": len(batches), "ids": ids}) + "\n")
            samples += len(ids)
            if slow:
                time.sleep(cfg.get("slow_ms", 20) / 1000.0)
            if cfg.get("step_ms"):
                time.sleep(cfg["step_ms"] / 1000.0)
            # The gradient sync of a training step.
            t = torch.tensor([len(ids)], dtype=torch.int64)
            dist.all_reduce(t)
            if every and len(batches) % every == 0 and rank == 0:
                write_json(os.path.join(cfg["out"], "ckpt.json"), dict(loader.state_dict(), step=len(batches)))
        epochs.append(batches)
    elapsed = time.monotonic() - t0
    dist.barrier()
    write_json(os.path.join(cfg["out"], "rank-%d.json" % rank), {
        "rank": rank, "world": world, "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
        "host": os.environ.get("SLUICE_MN_HOST"), "epochs": epochs, "len": len(ds),
        "samples": samples, "elapsed_s": elapsed, "first_batch_s": first_batch,
    })
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
