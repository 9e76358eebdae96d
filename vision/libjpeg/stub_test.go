//go:build !(libjpeg && cgo)

package libjpeg

import (
	"errors"
	"testing"
)

// TestUnavailable: without the libjpeg tag the package says so and Open
// fails with ErrUnavailable.
func TestUnavailable(t *testing.T) {
	if Available {
		t.Fatal("Available without the libjpeg tag")
	}
	if _, err := Open([]byte{0xff, 0xd8, 0xff}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open: %v", err)
	}
}
