package plan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrLauncherConflict is matched (errors.Is) by DetectWorld's error when two
// launchers' environments place the process differently.
var ErrLauncherConflict = errors.New("plan: launcher environments conflict")

// Launcher names a job launcher whose environment DetectWorld reads.
const (
	LauncherNone       = "none"       // no launcher: a single process
	LauncherTorchrun   = "torchrun"   // RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, LOCAL_RANK
	LauncherMPI        = "mpi"        // OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
	LauncherSlurm      = "slurm"      // SLURM_{PROCID,NTASKS,LOCALID,NNODES,NTASKS_PER_NODE}
	LauncherKubernetes = "kubernetes" // PET_{NNODES,NODE_RANK,NPROC_PER_NODE}, JOB_COMPLETION_INDEX
)

// Placement is where DetectWorld found this process: its World (before
// replication), its rank within the node, the launcher that placed it and
// the job it belongs to.
type Placement struct {
	World
	// LocalRank is the rank within the node as the launcher numbers it
	// (LOCAL_RANK, SLURM_LOCALID, ...); Rank%RanksPerNode when it gives none.
	LocalRank int
	// Launcher is the innermost launcher found (one of the Launcher* names).
	Launcher string
	// Outer lists the other launchers found, outermost last, each checked
	// against Launcher (for example "slurm" around "torchrun").
	Outer []string
	// JobID names the job: SLURM_JOB_ID (with SLURM_STEP_ID),
	// TORCHELASTIC_RUN_ID, or "" when no launcher names one.
	JobID string
}

// launcherView is one launcher's view of the process.
type launcherView struct {
	name      string
	rank      int // global rank; -1 when the launcher sees nodes only
	size      int // ranks it launched (nodes for a node-level launcher)
	localSize int // ranks per node
	localRank int // -1: not given
	nodeLevel bool
	vars      string // the variables it was read from, for messages
}

// DetectWorld finds where this process sits from the environment of the
// launcher that started it, read through getenv (usually os.Getenv).
//
// The innermost launcher present gives the world: torchrun's RANK,
// WORLD_SIZE and LOCAL_WORLD_SIZE (MosaicML's variables, so MosaicML and
// Sluice agree), else Open MPI's OMPI_COMM_WORLD_*, else Slurm's
// SLURM_PROCID, SLURM_NTASKS and SLURM_NNODES (or SLURM_NTASKS_PER_NODE),
// else Kubernetes' PET_NNODES, PET_NODE_RANK or JOB_COMPLETION_INDEX and
// PET_NPROC_PER_NODE (a PyTorchJob or Indexed Job pod that is itself the
// only rank of its node). Nothing set means one process.
//
// Every outer launcher found must agree with the inner one: it either
// launched the same processes (same size, same rank) or one process per
// node (its size is the node count, e.g. srun starting one torchrun per
// node); anything else is an ErrLauncherConflict naming both. Open MPI
// under Slurm is the exception: mpirun's own daemons are Slurm tasks, so
// Slurm's view is not checked against MPI's. Malformed values match
// ErrInvalid.
func DetectWorld(getenv func(string) string) (Placement, error) {
	views, err := launcherViews(getenv)
	if err != nil {
		return Placement{}, err
	}
	p := Placement{Launcher: LauncherNone, World: World{Nodes: 1, RanksPerNode: 1}}
	if j := strings.TrimSpace(getenv("SLURM_JOB_ID")); j != "" {
		p.JobID = "slurm:" + j
		if s := strings.TrimSpace(getenv("SLURM_STEP_ID")); s != "" {
			p.JobID += "." + s
		}
	} else if j := strings.TrimSpace(getenv("TORCHELASTIC_RUN_ID")); j != "" {
		p.JobID = "torchrun:" + j
	}
	if len(views) == 0 {
		return p, nil
	}
	in := views[0]
	if in.nodeLevel {
		// Kubernetes alone: the pod is its node's only rank.
		if in.localSize != 1 {
			return Placement{}, fmt.Errorf("%w: %s: PET_NPROC_PER_NODE=%q processes per node, but this process has no rank of its own (no RANK): start the ranks with torchrun",
				ErrInvalid, in.vars, getenv("PET_NPROC_PER_NODE"))
		}
		in.localRank, in.nodeLevel = 0, false
	}
	if in.localSize <= 0 || in.size%in.localSize != 0 {
		return Placement{}, fmt.Errorf("%w: %s: %d ranks are not a whole number of nodes of %d", ErrInvalid, in.vars, in.size, in.localSize)
	}
	nodes := in.size / in.localSize
	for _, out := range views[1:] {
		if in.name == LauncherMPI && out.name == LauncherSlurm {
			continue
		}
		p.Outer = append(p.Outer, out.name)
		switch {
		case !out.nodeLevel && out.size == in.size:
			if out.rank != in.rank {
				return Placement{}, fmt.Errorf("%w: %s says rank %d, %s says rank %d of the same %d processes",
					ErrLauncherConflict, in.vars, in.rank, out.vars, out.rank, in.size)
			}
		case out.size == nodes && (out.nodeLevel || out.localSize == 1):
			// One outer task per node, running the inner launcher.
		default:
			return Placement{}, fmt.Errorf("%w: %s has %d ranks on %d nodes, but %s has %d %s",
				ErrLauncherConflict, in.vars, in.size, nodes, out.vars, out.size, map[bool]string{true: "nodes", false: "processes"}[out.nodeLevel])
		}
	}
	p.World = World{Nodes: nodes, RanksPerNode: in.localSize, Rank: in.rank}
	if err := p.World.Validate(); err != nil {
		return Placement{}, fmt.Errorf("%s: %w", in.vars, err)
	}
	p.Launcher = in.name
	p.LocalRank = in.localRank
	if p.LocalRank < 0 {
		p.LocalRank = in.rank % in.localSize
	}
	if p.LocalRank >= in.localSize {
		return Placement{}, fmt.Errorf("%w: %s: local rank %d is not below the %d ranks per node", ErrInvalid, in.vars, p.LocalRank, in.localSize)
	}
	return p, nil
}

// launcherViews returns the views of every launcher present, innermost
// first.
func launcherViews(getenv func(string) string) ([]launcherView, error) {
	var views []launcherView
	for _, read := range []func(func(string) string) (*launcherView, error){torchView, mpiView, slurmView, kubernetesView} {
		v, err := read(getenv)
		if err != nil {
			return nil, err
		}
		if v != nil {
			views = append(views, *v)
		}
	}
	return views, nil
}

// envInt reads a non-negative integer; ok is false when the variable is
// unset or empty.
func envInt(getenv func(string) string, name string) (n int, ok bool, err error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return 0, false, nil
	}
	n, err = strconv.Atoi(v)
	if err != nil || n < 0 || n > 1<<24 {
		return 0, false, fmt.Errorf("%w: environment variable %s=%q is not a non-negative integer", ErrInvalid, name, v)
	}
	return n, true, nil
}

// envInts reads several variables; absent ones are -1.
func envInts(getenv func(string) string, names ...string) ([]int, bool, error) {
	out := make([]int, len(names))
	seen := false
	for i, name := range names {
		n, ok, err := envInt(getenv, name)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			n = -1
		}
		seen = seen || ok
		out[i] = n
	}
	return out, seen, nil
}

func torchView(getenv func(string) string) (*launcherView, error) {
	v, seen, err := envInts(getenv, "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "LOCAL_RANK")
	if err != nil || !seen || (v[0] < 0 && v[1] < 0 && v[2] < 0) {
		return nil, err
	}
	// MosaicML's defaults: rank 0, world 1, local world 1.
	rank, size, local := max(v[0], 0), max(v[1], 1), max(v[2], 1)
	if v[1] == 0 || v[2] == 0 {
		return nil, fmt.Errorf("%w: WORLD_SIZE=%d, LOCAL_WORLD_SIZE=%d must be positive", ErrInvalid, v[1], v[2])
	}
	return &launcherView{name: LauncherTorchrun, rank: rank, size: size, localSize: local, localRank: v[3],
		vars: fmt.Sprintf("torchrun (RANK=%d WORLD_SIZE=%d LOCAL_WORLD_SIZE=%d)", rank, size, local)}, nil
}

func mpiView(getenv func(string) string) (*launcherView, error) {
	v, seen, err := envInts(getenv, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")
	if err != nil || !seen {
		return nil, err
	}
	if v[0] < 0 || v[1] <= 0 {
		return nil, fmt.Errorf("%w: Open MPI environment: OMPI_COMM_WORLD_RANK and a positive OMPI_COMM_WORLD_SIZE are both needed", ErrInvalid)
	}
	local := v[2]
	if local <= 0 {
		local = 1
	}
	return &launcherView{name: LauncherMPI, rank: v[0], size: v[1], localSize: local, localRank: v[3],
		vars: fmt.Sprintf("Open MPI (OMPI_COMM_WORLD_RANK=%d OMPI_COMM_WORLD_SIZE=%d OMPI_COMM_WORLD_LOCAL_SIZE=%d)", v[0], v[1], local)}, nil
}

func slurmView(getenv func(string) string) (*launcherView, error) {
	// Only a task of a step has a rank: SLURM_PROCID and SLURM_NTASKS
	// both (a bare SLURM_PROCID is ignored, as before).
	if strings.TrimSpace(getenv("SLURM_PROCID")) == "" || strings.TrimSpace(getenv("SLURM_NTASKS")) == "" {
		return nil, nil
	}
	v, _, err := envInts(getenv, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NNODES", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")
	if err != nil {
		return nil, err
	}
	rank, size, nnodes, localID, perNode := v[0], v[1], v[2], v[3], v[4]
	if size <= 0 {
		return nil, fmt.Errorf("%w: SLURM_NTASKS=%d must be positive", ErrInvalid, size)
	}
	if perNode <= 0 {
		if t := strings.TrimSpace(getenv("SLURM_TASKS_PER_NODE")); t != "" {
			n, err := uniformTasksPerNode(t)
			if err != nil {
				return nil, err
			}
			perNode = n
		}
	}
	switch {
	case nnodes > 0 && perNode > 0 && nnodes*perNode != size:
		return nil, fmt.Errorf("%w: Slurm: SLURM_NTASKS=%d is not SLURM_NNODES=%d × %d tasks per node", ErrInvalid, size, nnodes, perNode)
	case perNode <= 0 && nnodes > 0:
		if size%nnodes != 0 {
			return nil, fmt.Errorf("%w: Slurm: SLURM_NTASKS=%d tasks are not spread evenly over SLURM_NNODES=%d nodes (Sluice needs the same ranks on every node)", ErrInvalid, size, nnodes)
		}
		perNode = size / nnodes
	case perNode <= 0:
		perNode = 1
	}
	return &launcherView{name: LauncherSlurm, rank: rank, size: size, localSize: perNode, localRank: localID,
		vars: fmt.Sprintf("Slurm (SLURM_PROCID=%d SLURM_NTASKS=%d, %d per node)", rank, size, perNode)}, nil
}

// uniformTasksPerNode parses SLURM_TASKS_PER_NODE ("4(x2)", "4,4") and
// returns its count when every node has the same.
func uniformTasksPerNode(s string) (int, error) {
	n := -1
	for _, part := range strings.Split(s, ",") {
		c, _, _ := strings.Cut(part, "(")
		k, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || k <= 0 {
			return 0, fmt.Errorf("%w: SLURM_TASKS_PER_NODE=%q is not a task count list", ErrInvalid, s)
		}
		if n >= 0 && k != n {
			return 0, fmt.Errorf("%w: SLURM_TASKS_PER_NODE=%q: nodes run different task counts (Sluice needs the same ranks on every node)", ErrInvalid, s)
		}
		n = k
	}
	return n, nil
}

func kubernetesView(getenv func(string) string) (*launcherView, error) {
	v, seen, err := envInts(getenv, "PET_NODE_RANK", "JOB_COMPLETION_INDEX")
	if err != nil {
		return nil, err
	}
	nnodesS := strings.TrimSpace(getenv("PET_NNODES"))
	if !seen && nnodesS == "" {
		return nil, nil
	}
	node := v[0]
	if node >= 0 && v[1] >= 0 && node != v[1] {
		return nil, fmt.Errorf("%w: Kubernetes: PET_NODE_RANK=%d but JOB_COMPLETION_INDEX=%d", ErrLauncherConflict, node, v[1])
	}
	if node < 0 {
		node = v[1]
	}
	// PET_NNODES may be an elastic range "MIN:MAX"; only a fixed count
	// places the process.
	lo, hi, isRange := strings.Cut(nnodesS, ":")
	if isRange && lo != hi {
		return nil, fmt.Errorf("%w: PET_NNODES=%q is an elastic range: Sluice needs a fixed node count (use torchrun's RANK/WORLD_SIZE)", ErrInvalid, nnodesS)
	}
	nnodes, ok, err := envInt(func(string) string { return lo }, "PET_NNODES")
	if err != nil {
		return nil, err
	}
	if !ok || nnodes == 0 {
		return nil, fmt.Errorf("%w: Kubernetes: node index %d but no PET_NNODES: set PET_NNODES to the pod count (JOB_COMPLETION_INDEX alone does not say how many pods run)", ErrInvalid, node)
	}
	if node < 0 {
		node = 0
	}
	if node >= nnodes {
		return nil, fmt.Errorf("%w: Kubernetes: node index %d is not below PET_NNODES=%d", ErrInvalid, node, nnodes)
	}
	perNode := 1
	if s := strings.TrimSpace(getenv("PET_NPROC_PER_NODE")); s != "" {
		// "auto", "gpu" and "cpu" let torchrun choose; they say nothing
		// here unless this process must be the rank itself.
		if k, err := strconv.Atoi(s); err == nil && k > 0 {
			perNode = k
		} else if err == nil {
			return nil, fmt.Errorf("%w: PET_NPROC_PER_NODE=%q must be positive", ErrInvalid, s)
		} else {
			perNode = 0
		}
	}
	return &launcherView{name: LauncherKubernetes, rank: node, size: nnodes, localSize: perNode, localRank: -1, nodeLevel: true,
		vars: fmt.Sprintf("Kubernetes (node %d of PET_NNODES=%d)", node, nnodes)}, nil
}
