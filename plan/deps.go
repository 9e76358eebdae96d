package plan

import "errors"

// partSpec describes one get_partitions call.
type partSpec struct {
	algo                 string
	n                    int64
	ncn                  int
	shape                Shape
	batch                int
	dropFirst            int64
	initialPhysicalNodes int
}

// permuter maps canonical positions to shuffled big IDs.
type permuter interface {
	apply(ids []int64) error
}

var errTODO = errors.New("plan: partition/shuffle not wired yet")

func partitionShape(ps partSpec) ([5]int, error)                           { return [5]int{}, errTODO }
func partitionWorker(ps partSpec, node, rank, worker int) ([]int64, error) { return nil, errTODO }
func partitionFull(algo string, n int64, ncn int, shape Shape, batch int, drop int64, ipn int) (work, error) {
	return work{}, errTODO
}
func shuffleFull(algo string, units []int64, ncn int, seed, epoch, block int64) ([]int64, error) {
	return nil, errTODO
}
func newPermuter(algo string, units []int64, ncn int, seed, epoch, block int64) (permuter, error) {
	return nil, errTODO
}
