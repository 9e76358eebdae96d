"""Where this process sits: rank, world, DataLoader worker (spec §13.1)."""

import os


def _env_int(name, default):
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise ValueError("environment variable %s=%r is not an integer" % (name, v)) from None


def detect():
    """Returns dict(rank, world_size, local_world_size, worker, num_workers).

    Rank and world come from torch.distributed when it is initialised, else
    from RANK / WORLD_SIZE; LOCAL_WORLD_SIZE from the environment. The worker
    comes from torch's get_worker_info() inside a DataLoader worker.
    """
    rank = _env_int("RANK", 0)
    world = _env_int("WORLD_SIZE", 1)
    local_world = _env_int("LOCAL_WORLD_SIZE", 1)
    worker, num_workers = 0, 1
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            rank, world = dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    try:
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        if info is not None:
            worker, num_workers = info.id, info.num_workers
    except ImportError:
        pass
    if world < 1 or not 0 <= rank < world:
        raise ValueError("RANK=%d is outside WORLD_SIZE=%d" % (rank, world))
    if local_world < 1 or world % local_world:
        raise ValueError("WORLD_SIZE=%d is not a multiple of LOCAL_WORLD_SIZE=%d" % (world, local_world))
    return {
        "rank": rank,
        "world_size": world,
        "local_world_size": local_world,
        "worker": worker,
        "num_workers": num_workers,
    }


def job_key():
    """A name shared by every process of one training job on this node.

    $SLUICE_JOB when set; else torchrun's rendezvous (TORCHELASTIC_RUN_ID,
    MASTER_ADDR, MASTER_PORT) when present; else this process (its
    DataLoader workers inherit the key from it).
    """
    j = os.environ.get("SLUICE_JOB")
    if j:
        return "env:" + j
    parts = [os.environ.get(k, "") for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")]
    if any(parts):
        return "torch:" + ":".join(parts)
    import time

    return "pid:%d:%d" % (os.getpid(), time.time_ns())
