//go:build !amd64

package nprand

// vecPaths lists the paths the tests can force: only the scalar code here.
func vecPaths() []bool { return []bool{false} }

// setVec does nothing: only amd64 has the vector kernels.
func setVec(bool) (restore func()) { return func() {} }
