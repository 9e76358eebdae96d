//go:build !amd64

package nprand

// countTop is countTopScalar: only amd64 has the vector kernels.
func countTop(top []uint16, k, step int64, w uint64, und []LineHit) (int, []LineHit) {
	return countTopScalar(top, k, step, w, und)
}

// fillTop is fillTopScalar: only amd64 has the vector kernels.
func fillTop(top []uint16, ck []u128, s, inc u128) u128 {
	return fillTopScalar(top, ck, s, inc)
}
