package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// Shape is the shape of the (parallel) world an epoch is dealt to: physical
// nodes, ranks (devices) per node and DataLoader workers per rank.
type Shape struct {
	Nodes          int
	RanksPerNode   int
	WorkersPerRank int
}

func (s Shape) validate() error {
	if s.Nodes <= 0 || s.RanksPerNode <= 0 || s.WorkersPerRank <= 0 {
		return fmt.Errorf("%w: shape nodes=%d ranks_per_node=%d workers_per_rank=%d: all must be positive",
			ErrInvalid, s.Nodes, s.RanksPerNode, s.WorkersPerRank)
	}
	const maxDim = 1 << 20
	if s.Nodes > maxDim || s.RanksPerNode > maxDim || s.WorkersPerRank > maxDim ||
		int64(s.Nodes)*int64(s.RanksPerNode)*int64(s.WorkersPerRank) > maxDim {
		return fmt.Errorf("%w: shape nodes=%d ranks_per_node=%d workers_per_rank=%d is too large",
			ErrInvalid, s.Nodes, s.RanksPerNode, s.WorkersPerRank)
	}
	return nil
}

// NumRanks returns Nodes·RanksPerNode.
func (s Shape) NumRanks() int { return s.Nodes * s.RanksPerNode }

// World is where one training process (rank) sits (spec §13.1), before
// replication is applied. The zero value is invalid; use WorldFromEnv or fill
// every field.
type World struct {
	// Nodes is the number of physical nodes (WORLD_SIZE / LOCAL_WORLD_SIZE).
	Nodes int
	// RanksPerNode is LOCAL_WORLD_SIZE.
	RanksPerNode int
	// Rank is this process's global rank (RANK), node-major.
	Rank int
	// Replication is the number of consecutive ranks that see identical
	// data (replication; 0 or 1 means none).
	Replication int
}

// WorldFromEnv reads RANK, WORLD_SIZE and LOCAL_WORLD_SIZE (defaults 0, 1,
// 1) through getenv, exactly as MosaicML does (NODE_RANK is not read; the
// node is RANK / LOCAL_WORLD_SIZE). Replication is left at 0.
func WorldFromEnv(getenv func(string) string) (World, error) {
	get := func(name string, def int) (int, error) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%w: environment variable %s=%q is not a non-negative integer", ErrInvalid, name, v)
		}
		return n, nil
	}
	rank, err := get("RANK", 0)
	if err != nil {
		return World{}, err
	}
	size, err := get("WORLD_SIZE", 1)
	if err != nil {
		return World{}, err
	}
	local, err := get("LOCAL_WORLD_SIZE", 1)
	if err != nil {
		return World{}, err
	}
	if local == 0 || size == 0 || size%local != 0 {
		return World{}, fmt.Errorf("%w: WORLD_SIZE=%d is not a positive multiple of LOCAL_WORLD_SIZE=%d", ErrInvalid, size, local)
	}
	w := World{Nodes: size / local, RanksPerNode: local, Rank: rank}
	return w, w.Validate()
}

// Validate reports whether the world is consistent.
func (w World) Validate() error {
	if w.Nodes <= 0 || w.RanksPerNode <= 0 {
		return fmt.Errorf("%w: world nodes=%d ranks_per_node=%d must be positive", ErrInvalid, w.Nodes, w.RanksPerNode)
	}
	if w.Rank < 0 || w.Rank >= w.Nodes*w.RanksPerNode {
		return fmt.Errorf("%w: rank %d out of range for %d ranks", ErrInvalid, w.Rank, w.Nodes*w.RanksPerNode)
	}
	if w.Replication < 0 {
		return fmt.Errorf("%w: replication %d must be positive", ErrInvalid, w.Replication)
	}
	if k := w.Replication; k > 1 && (w.Nodes*w.RanksPerNode)%k != 0 {
		return fmt.Errorf("%w: replication %d does not divide the %d ranks", ErrInvalid, k, w.Nodes*w.RanksPerNode)
	}
	return nil
}

// NumRanks returns the unreplicated rank count.
func (w World) NumRanks() int { return w.Nodes * w.RanksPerNode }

// Node returns the node of this rank.
func (w World) Node() int { return w.Rank / w.RanksPerNode }

// RankOfNode returns this rank's index within its node.
func (w World) RankOfNode() int { return w.Rank % w.RanksPerNode }

// Parallel returns the "parallel" world in which sample order is computed
// (spec §13.1): with replication k, rank' = rank/k, num_ranks' = ranks/k,
// and nodes' = num_ranks'/ranks_per_node if that divides, else 1. Without
// replication it returns w unchanged.
func (w World) Parallel() (World, error) {
	if err := w.Validate(); err != nil {
		return World{}, err
	}
	k := w.Replication
	if k <= 1 {
		return World{Nodes: w.Nodes, RanksPerNode: w.RanksPerNode, Rank: w.Rank}, nil
	}
	ranks := w.NumRanks() / k
	nodes := 1
	if ranks%w.RanksPerNode == 0 {
		nodes = ranks / w.RanksPerNode
	}
	return World{Nodes: nodes, RanksPerNode: ranks / nodes, Rank: w.Rank / k}, nil
}

// Shape returns the parallel world's shape with workersPerRank workers.
func (w World) Shape(workersPerRank int) (Shape, error) {
	p, err := w.Parallel()
	if err != nil {
		return Shape{}, err
	}
	s := Shape{Nodes: p.Nodes, RanksPerNode: p.RanksPerNode, WorkersPerRank: workersPerRank}
	return s, s.validate()
}
