package cache_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the cache starts (fetches) ends with Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
