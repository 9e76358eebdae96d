package stream

import (
	"fmt"

	"github.com/sluicedata/sluice/plan"
)

// WorldFromEnv returns this process's place in the training job from the
// environment of its launcher (plan.DetectWorld: torchrun's RANK,
// WORLD_SIZE and LOCAL_WORLD_SIZE, Open MPI, Slurm or Kubernetes, with an
// error when they conflict). Nothing set means a single process. getenv is
// usually os.Getenv.
func WorldFromEnv(getenv func(string) string) (plan.World, error) {
	p, err := plan.DetectWorld(getenv)
	if err != nil {
		return plan.World{}, fmt.Errorf("stream: %w", err)
	}
	return p.World, nil
}
