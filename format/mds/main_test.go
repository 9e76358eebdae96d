package mds

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine (for example a
// Writer's pipeline) outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
