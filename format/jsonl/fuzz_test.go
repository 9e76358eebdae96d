package jsonl_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
)

// joinSeed packs a data file and a meta file into one fuzz input: u32
// length of the meta, the meta, then the data.
func joinSeed(data, meta []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(meta)))
	return append(append(b, meta...), data...)
}

func splitSeed(b []byte) (data, meta []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n > len(b)-4 {
		return nil, nil, false
	}
	return b[4+n:], b[4 : 4+n], true
}

// FuzzShard opens arbitrary data and meta bytes as a shard (columns from
// the meta file's config) and decodes every sample: it must never panic,
// and a record that decodes must encode back to a record that decodes to
// the same sample.
func FuzzShard(f *testing.F) {
	data, meta, _ := shardBytes(f)
	f.Add(joinSeed(data, meta))
	f.Add(joinSeed(nil, meta[:4]))
	f.Add(joinSeed([]byte("{\"x\": NaN}\n[1]\n"), meta))
	f.Fuzz(func(t *testing.T, b []byte) {
		data, meta, ok := splitSeed(b)
		if !ok {
			return
		}
		sh, err := jsonl.OpenBytes(data, meta, nil)
		if err != nil {
			return
		}
		defer sh.Close()
		for j := 0; j < sh.Len(); j++ {
			jsonl.AppendDump(nil, int64(j), 0, sh, j)
			off, n, err := sh.Span(j)
			if err != nil || off < 0 || off+n > int64(len(data)) {
				t.Fatalf("Span(%d) = %d, %d, %v", j, off, n, err)
			}
			s, err := sh.Sample(j)
			if err != nil {
				continue
			}
			// Re-encode every key as an untyped JSON object and decode again.
			obj := map[string]any{}
			for k, v := range s {
				obj[k] = v
			}
			text, err := format.AppendJSON(nil, obj, true)
			if err != nil {
				continue
			}
			again, err := sh.Schema().Decode(append(text, sh.Schema().Newline()...))
			if err != nil {
				t.Fatalf("re-encoded sample %d does not decode: %v\n%s", j, err, text)
			}
			text2, _ := format.AppendJSON(nil, map[string]any(again), true)
			if !bytes.Equal(text, text2) {
				t.Fatalf("sample %d not stable:\n%s\n%s", j, text, text2)
			}
		}
	})
}
