package stream

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicedata/sluice/plan"
)

// WorldFromEnv returns this process's place in the training job from the
// environment: RANK, WORLD_SIZE and LOCAL_WORLD_SIZE (torchrun and
// MosaicML; the node is RANK / LOCAL_WORLD_SIZE), or, when RANK is unset,
// Slurm's SLURM_PROCID, SLURM_NTASKS and SLURM_NTASKS_PER_NODE (or the
// first count of SLURM_TASKS_PER_NODE). Nothing set means a single
// process. getenv is usually os.Getenv.
func WorldFromEnv(getenv func(string) string) (plan.World, error) {
	if getenv("RANK") == "" && getenv("SLURM_PROCID") != "" {
		perNode := getenv("SLURM_NTASKS_PER_NODE")
		if perNode == "" {
			// "4(x2),3" → 4: the first node's count.
			perNode, _, _ = strings.Cut(getenv("SLURM_TASKS_PER_NODE"), "(")
			perNode, _, _ = strings.Cut(perNode, ",")
		}
		env := map[string]string{
			"RANK": getenv("SLURM_PROCID"), "WORLD_SIZE": getenv("SLURM_NTASKS"),
			"LOCAL_WORLD_SIZE": perNode,
		}
		for k, v := range env {
			if v != "" {
				if _, err := strconv.Atoi(v); err != nil {
					return plan.World{}, fmt.Errorf("stream: Slurm environment: %s=%q is not an integer", k, v)
				}
			}
		}
		getenv = func(k string) string { return env[k] }
	}
	w, err := plan.WorldFromEnv(getenv)
	if err != nil {
		return plan.World{}, fmt.Errorf("stream: %w", err)
	}
	return w, nil
}
