package nprand

// vecPaths lists the paths the tests can force: the scalar code, and the
// vector kernels where the CPU has them.
func vecPaths() []bool {
	if hasVec {
		return []bool{false, true}
	}
	return []bool{false}
}

// setVec makes the kernels run (or not) until restore is called; tests
// using it must not run in parallel.
func setVec(vec bool) (restore func()) {
	saved := hasVec
	hasVec = vec
	return func() { hasVec = saved }
}
