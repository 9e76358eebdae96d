package compress

import "github.com/klauspost/compress/zstd"

func zstdHasFCS(b []byte) bool {
	var h zstd.Header
	return h.Decode(b) == nil && h.HasFCS
}
