package xsv_test

import (
	"encoding/binary"
	"testing"

	"github.com/sluicedata/sluice/format/xsv"
)

// joinSeed packs a data file and a meta file into one fuzz input: u32
// length of the meta, the meta, then the data.
func joinSeed(data, meta []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(meta)))
	return append(append(b, meta...), data...)
}

// FuzzShard opens arbitrary data and meta bytes as a shard (columns from
// the meta file's config) and decodes every sample: it must never panic,
// and a sample that decodes must encode to a line that decodes to the
// same text again.
func FuzzShard(f *testing.F) {
	data, meta, _ := shardBytes(f)
	f.Add(joinSeed(data, meta))
	f.Add(joinSeed([]byte("f;s;x\n1e5;;-0\nnan;a;1_0\n"), meta))
	f.Add(joinSeed(nil, meta[:8]))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 {
			return
		}
		n := int(binary.LittleEndian.Uint32(b))
		if n > len(b)-4 {
			return
		}
		sh, err := xsv.OpenBytes(b[4+n:], b[4:4+n], nil)
		if err != nil {
			return
		}
		defer sh.Close()
		schema := sh.Schema()
		for j := 0; j < sh.Len(); j++ {
			xsv.AppendDump(nil, int64(j), 0, sh, j)
			s, err := sh.Sample(j)
			if err != nil {
				continue
			}
			line, err := schema.AppendRecord(nil, s)
			if err != nil {
				// Decoded text may not be writable (a float column's "nan"
				// is, but a str field may hold the newline's prefix); only
				// successful encodings must round-trip.
				continue
			}
			again, err := schema.Decode(line)
			if err != nil {
				t.Fatalf("sample %d re-encoded as %q does not decode: %v", j, line, err)
			}
			line2, err := schema.AppendRecord(nil, again)
			if err != nil || string(line2) != string(line) {
				t.Fatalf("sample %d not stable: %q then %q (%v)", j, line, line2, err)
			}
		}
	})
}
