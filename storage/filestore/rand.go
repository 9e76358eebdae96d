package filestore

import (
	"encoding/hex"
	"math/rand/v2"
)

// randSuffix returns a random suffix for a temporary file name.
func randSuffix() string {
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b[:])
}
