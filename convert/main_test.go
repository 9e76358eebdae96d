package convert

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Idle keep-alive connections of the HTTP client outlive a test.
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
