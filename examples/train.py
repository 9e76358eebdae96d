"""A minimal training loop driven by a job file (examples/configs/train.yaml).

Started by torchrun (directly, from examples/slurm/train.sbatch, or by
`sluice run` for kind: train). The dataset's arguments come from the job
file's dataset: section, the hyperparameters from its training: section;
rank and world come from the launcher's environment (torchrun, Slurm,
Kubernetes, Open MPI).

    SLUICE_CONFIG=examples/configs/train.yaml torchrun --nproc_per_node 2 examples/train.py
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

import sluice
from sluice import config


def main():
    location = os.environ.get("SLUICE_CONFIG") or (sys.argv[1] if len(sys.argv) > 1 else None)
    hp = config.training(location) or {}
    if "WORLD_SIZE" in os.environ and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    ds = sluice.StreamingDataset.from_config(location)
    loader = sluice.StreamingDataLoader(ds, batch_size=ds.batch_size, num_workers=int(hp.get("workers", 2)))
    resume = hp.get("resume")
    if resume and os.path.exists(resume):
        with open(resume) as f:
            loader.load_state_dict(json.load(f))
    rank = dist.get_rank() if dist.is_initialized() else 0
    t0, seen = time.monotonic(), 0
    for epoch in range(int(hp.get("epochs", 1))):
        for step, batch in enumerate(loader):
            n = len(next(iter(batch.values())))
            seen += n
            # ... forward, backward, optimizer step ...
            if dist.is_initialized():
                dist.all_reduce(torch.zeros(1))  # stands in for the gradient sync
            if rank == 0 and step % int(hp.get("log_every", 50)) == 0:
                print("epoch %d step %d: %.0f samples/s on rank 0" % (epoch, step, seen / (time.monotonic() - t0)), flush=True)
            if hp.get("checkpoint") and rank == 0 and step % int(hp.get("checkpoint_every", 500)) == 0:
                tmp = hp["checkpoint"] + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(loader.state_dict(), f)
                os.replace(tmp, hp["checkpoint"])
    if rank == 0:
        print(json.dumps({"samples_rank0": seen, "seconds": time.monotonic() - t0}), flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
