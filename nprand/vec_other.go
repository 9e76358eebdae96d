//go:build !amd64

package nprand

// skipFast reports false: only amd64 has the vector kernels.
func (g *Generator) skipFast(uint64) bool { return false }

// skipsFast reports false: only amd64 has the vector kernels.
func (g *Generator) skipsFast(int, func(int) int, func(int, Generator)) bool { return false }

// countLineFast reports false: only amd64 has the vector kernels.
func (g *Generator) countLineFast(int, int64, int64, int64, int64, []LineHit) (int, []LineHit, bool) {
	return 0, nil, false
}

// shuffleFast reports false: only amd64 has the vector kernels.
func shuffleFast[T int32 | int64](*Generator, []T, uint64, uint64) bool { return false }

// shuffleSwapFast reports false: only amd64 has the vector kernels.
func shuffleSwapFast(*Generator, uint64, func(i, j int)) bool { return false }

// partnersFast reports false: only amd64 has the vector kernels.
func partnersFast(*Generator, []uint32, uint64, uint64) bool { return false }
