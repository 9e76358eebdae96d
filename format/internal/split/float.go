package split

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"

	"github.com/sluicedata/sluice/format"
)

// AppendDumpFloat appends the canonical dump form of a float64 (the
// reference fixtures' convention): {"bits": 16 hex digits, "s": repr}.
func AppendDumpFloat(dst []byte, x float64) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, `{"bits": "`...)
	b := math.Float64bits(x)
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hex[b>>uint(shift)&15])
	}
	dst = append(dst, `", "s": "`...)
	dst = format.AppendPyFloat(dst, x, 64)
	return append(dst, `"}`...)
}

// AppendDumpColumn appends one column of a canonical dump line:
// "name": {"raw_len": n, "raw_sha256": hex, "v": <value>}; value appends
// the value's canonical form.
func AppendDumpColumn(dst []byte, name string, raw []byte, value func([]byte) ([]byte, error)) ([]byte, error) {
	dst = format.AppendJSONStringUTF8(dst, name)
	dst = append(dst, `: {"raw_len": `...)
	dst = strconv.AppendInt(dst, int64(len(raw)), 10)
	sum := sha256.Sum256(raw)
	dst = append(dst, `, "raw_sha256": "`...)
	dst = hex.AppendEncode(dst, sum[:])
	dst = append(dst, `", "v": `...)
	dst, err := value(dst)
	if err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// AppendDumpTail closes a canonical dump line: }, "i": i, "shard": k}.
func AppendDumpTail(dst []byte, i int64, k int) []byte {
	dst = append(dst, `}, "i": `...)
	dst = strconv.AppendInt(dst, i, 10)
	dst = append(dst, `, "shard": `...)
	dst = strconv.AppendInt(dst, int64(k), 10)
	return append(dst, '}')
}
