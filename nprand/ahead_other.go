//go:build !amd64

package nprand

// countTop is countTopScalar: only amd64 has the vector kernels.
func countTop(top []uint16, k, step int64, w uint64, und []LineHit) (int, []LineHit) {
	return countTopScalar(top, k, step, w, und)
}
