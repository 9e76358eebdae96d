"""Where this process sits: rank, world, DataLoader worker (spec §13.1).

The launcher rules are those of the Go side (plan.DetectWorld); both are
tested against the same cases (plan/testdata/launchers.json).
"""

import os


class LauncherConflictError(ValueError):
    """Two launchers' environments place this process differently."""


def _env_int(env, name):
    """A non-negative integer variable, or None when unset or empty."""
    v = env.get(name)
    if v is None or v.strip() == "":
        return None
    try:
        n = int(v.strip())
    except ValueError:
        n = -1
    if n < 0 or n > 1 << 24:
        raise ValueError("environment variable %s=%r is not a non-negative integer" % (name, v))
    return n


def _torch_view(env):
    rank, size, local, local_rank = (_env_int(env, k) for k in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "LOCAL_RANK"))
    if rank is None and size is None and local is None:
        return None
    if size == 0 or local == 0:
        raise ValueError("WORLD_SIZE=%s, LOCAL_WORLD_SIZE=%s must be positive" % (size, local))
    # MosaicML's defaults: rank 0, world 1, local world 1.
    rank, size, local = rank or 0, size or 1, local or 1
    return dict(name="torchrun", rank=rank, size=size, local_size=local, local_rank=local_rank, node_level=False,
                vars="torchrun (RANK=%d WORLD_SIZE=%d LOCAL_WORLD_SIZE=%d)" % (rank, size, local))


def _mpi_view(env):
    names = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")
    rank, size, local, local_rank = (_env_int(env, k) for k in names)
    if all(x is None for x in (rank, size, local, local_rank)):
        return None
    if rank is None or not size:
        raise ValueError("Open MPI environment: OMPI_COMM_WORLD_RANK and a positive OMPI_COMM_WORLD_SIZE are both needed")
    local = local or 1
    return dict(name="mpi", rank=rank, size=size, local_size=local, local_rank=local_rank, node_level=False,
                vars="Open MPI (OMPI_COMM_WORLD_RANK=%d OMPI_COMM_WORLD_SIZE=%d OMPI_COMM_WORLD_LOCAL_SIZE=%d)" % (rank, size, local))


def _uniform_tasks_per_node(s):
    n = None
    for part in s.split(","):
        try:
            k = int(part.split("(")[0].strip())
        except ValueError:
            k = 0
        if k <= 0:
            raise ValueError("SLURM_TASKS_PER_NODE=%r is not a task count list" % s)
        if n is not None and k != n:
            raise ValueError("SLURM_TASKS_PER_NODE=%r: nodes run different task counts (Sluice needs the same ranks on every node)" % s)
        n = k
    return n


def _slurm_view(env):
    # Only a task of a step has a rank: SLURM_PROCID and SLURM_NTASKS both.
    if not (env.get("SLURM_PROCID") or "").strip() or not (env.get("SLURM_NTASKS") or "").strip():
        return None
    rank, size, nnodes, local_id, per_node = (
        _env_int(env, k) for k in ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_NNODES", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"))
    if not size:
        raise ValueError("SLURM_NTASKS=%s must be positive" % size)
    if not per_node and (env.get("SLURM_TASKS_PER_NODE") or "").strip():
        per_node = _uniform_tasks_per_node(env["SLURM_TASKS_PER_NODE"].strip())
    if nnodes and per_node and nnodes * per_node != size:
        raise ValueError("Slurm: SLURM_NTASKS=%d is not SLURM_NNODES=%d × %d tasks per node" % (size, nnodes, per_node))
    if not per_node and nnodes:
        if size % nnodes:
            raise ValueError("Slurm: SLURM_NTASKS=%d tasks are not spread evenly over SLURM_NNODES=%d nodes "
                             "(Sluice needs the same ranks on every node)" % (size, nnodes))
        per_node = size // nnodes
    per_node = per_node or 1
    return dict(name="slurm", rank=rank, size=size, local_size=per_node, local_rank=local_id, node_level=False,
                vars="Slurm (SLURM_PROCID=%d SLURM_NTASKS=%d, %d per node)" % (rank, size, per_node))


def _kubernetes_view(env):
    node, index = _env_int(env, "PET_NODE_RANK"), _env_int(env, "JOB_COMPLETION_INDEX")
    nnodes_s = (env.get("PET_NNODES") or "").strip()
    if node is None and index is None and not nnodes_s:
        return None
    if node is not None and index is not None and node != index:
        raise LauncherConflictError("Kubernetes: PET_NODE_RANK=%d but JOB_COMPLETION_INDEX=%d" % (node, index))
    if node is None:
        node = index
    lo, sep, hi = nnodes_s.partition(":")
    if sep and lo != hi:
        raise ValueError("PET_NNODES=%r is an elastic range: Sluice needs a fixed node count (use torchrun's RANK/WORLD_SIZE)" % nnodes_s)
    nnodes = _env_int({"PET_NNODES": lo}, "PET_NNODES")
    if not nnodes:
        raise ValueError("Kubernetes: node index %s but no PET_NNODES: set PET_NNODES to the pod count "
                         "(JOB_COMPLETION_INDEX alone does not say how many pods run)" % node)
    node = node or 0
    if node >= nnodes:
        raise ValueError("Kubernetes: node index %d is not below PET_NNODES=%d" % (node, nnodes))
    per_node = 1
    s = (env.get("PET_NPROC_PER_NODE") or "").strip()
    if s:
        try:
            per_node = int(s)
        except ValueError:
            per_node = 0  # "auto", "gpu", "cpu": torchrun chooses
        else:
            if per_node <= 0:
                raise ValueError("PET_NPROC_PER_NODE=%r must be positive" % s)
    return dict(name="kubernetes", rank=node, size=nnodes, local_size=per_node, local_rank=None, node_level=True,
                vars="Kubernetes (node %d of PET_NNODES=%d)" % (node, nnodes))


def placement(env=None):
    """Where the launcher placed this process, from env (default os.environ).

    Returns dict(nodes, ranks_per_node, rank, local_rank, launcher, outer,
    job_id). The innermost launcher gives the world: torchrun's RANK,
    WORLD_SIZE, LOCAL_WORLD_SIZE (MosaicML's variables), else Open MPI's
    OMPI_COMM_WORLD_*, else Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_NNODES,
    else Kubernetes' PET_NNODES with PET_NODE_RANK or JOB_COMPLETION_INDEX.
    Each outer launcher must have launched the same processes (same size and
    rank) or one process per node; otherwise LauncherConflictError. Slurm
    around Open MPI is not checked (mpirun's daemons are Slurm tasks).
    Malformed values raise ValueError.
    """
    env = os.environ if env is None else env
    views = [v for v in (f(env) for f in (_torch_view, _mpi_view, _slurm_view, _kubernetes_view)) if v is not None]
    job_id = ""
    if (env.get("SLURM_JOB_ID") or "").strip():
        job_id = "slurm:" + env["SLURM_JOB_ID"].strip()
        if (env.get("SLURM_STEP_ID") or "").strip():
            job_id += "." + env["SLURM_STEP_ID"].strip()
    elif (env.get("TORCHELASTIC_RUN_ID") or "").strip():
        job_id = "torchrun:" + env["TORCHELASTIC_RUN_ID"].strip()
    out = dict(nodes=1, ranks_per_node=1, rank=0, local_rank=0, launcher="none", outer=[], job_id=job_id)
    if not views:
        return out
    inner = dict(views[0])
    if inner["node_level"]:
        if inner["local_size"] != 1:
            raise ValueError("%s: PET_NPROC_PER_NODE=%r processes per node, but this process has no rank of its own "
                             "(no RANK): start the ranks with torchrun" % (inner["vars"], env.get("PET_NPROC_PER_NODE")))
        inner.update(local_rank=0, node_level=False)
    size, local = inner["size"], inner["local_size"]
    if local <= 0 or size % local:
        raise ValueError("%s: %d ranks are not a whole number of nodes of %d" % (inner["vars"], size, local))
    nodes = size // local
    for o in views[1:]:
        if inner["name"] == "mpi" and o["name"] == "slurm":
            continue
        out["outer"].append(o["name"])
        if not o["node_level"] and o["size"] == size:
            if o["rank"] != inner["rank"]:
                raise LauncherConflictError("%s says rank %d, %s says rank %d of the same %d processes"
                                            % (inner["vars"], inner["rank"], o["vars"], o["rank"], size))
        elif o["size"] == nodes and (o["node_level"] or o["local_size"] == 1):
            pass  # one outer task per node, running the inner launcher
        else:
            raise LauncherConflictError("%s has %d ranks on %d nodes, but %s has %d %s"
                                        % (inner["vars"], size, nodes, o["vars"], o["size"],
                                           "nodes" if o["node_level"] else "processes"))
    rank = inner["rank"]
    if not 0 <= rank < size:
        raise ValueError("%s: rank %d out of range for %d ranks" % (inner["vars"], rank, size))
    local_rank = inner["local_rank"]
    if local_rank is None:
        local_rank = rank % local
    if local_rank >= local:
        raise ValueError("%s: local rank %d is not below the %d ranks per node" % (inner["vars"], local_rank, local))
    out.update(nodes=nodes, ranks_per_node=local, rank=rank, local_rank=local_rank, launcher=inner["name"])
    return out


def detect():
    """Returns dict(rank, world_size, local_world_size, worker, num_workers).

    Rank and world come from the launcher's environment (placement());
    torch.distributed, when it is initialised, has the last word on rank and
    world size. The worker comes from torch's get_worker_info() inside a
    DataLoader worker.
    """
    p = placement()
    rank, world = p["rank"], p["nodes"] * p["ranks_per_node"]
    local_world = p["ranks_per_node"]
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
    MASTER_ADDR, MASTER_PORT) when present; else the Slurm job and step
    (SLURM_JOB_ID, SLURM_STEP_ID); else this process (its DataLoader
    workers inherit the key from it).
    """
    j = os.environ.get("SLUICE_JOB")
    if j:
        return "env:" + j
    parts = [os.environ.get(k, "") for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")]
    if any(parts):
        return "torch:" + ":".join(parts)
    if os.environ.get("SLURM_JOB_ID"):
        return "slurm:%s.%s" % (os.environ["SLURM_JOB_ID"], os.environ.get("SLURM_STEP_ID", ""))
    import time

    return "pid:%d:%d" % (os.getpid(), time.time_ns())
