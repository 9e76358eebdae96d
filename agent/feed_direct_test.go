package agent

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// TestFeedLargeRecordLayouts feeds records around the direct path's
// thresholds (records of directMin bytes or more, values of directValue or
// more read straight into the batch) with small columns before, between
// and after the large values, one longer than the prefix read with the
// column lengths, and checks every byte of every value.
func TestFeedLargeRecordLayouts(t *testing.T) {
	pat := func(i, n int, salt byte) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(i*31+j*7) ^ salt
		}
		return b
	}
	cases := []struct {
		name string
		cols map[string]string
		make func(i int) format.Sample
	}{
		// MDS orders columns by name: a, b, c, d.
		{"a long small column leads a large value", map[string]string{"a": "str", "b": "bytes", "c": "int", "d": "str"},
			func(i int) format.Sample {
				return format.Sample{"a": string(bytes.Repeat([]byte{'x'}, 1500+i)), "b": pat(i, 20<<10+i, 1), "c": int64(i), "d": fmt.Sprint("d", i)}
			}},
		{"two large values, small columns between and after", map[string]string{"a": "bytes", "b": "int", "c": "bytes", "d": "str"},
			func(i int) format.Sample {
				return format.Sample{"a": pat(i, directValue+i, 2), "b": int64(-i), "c": pat(i, 12<<10, 3), "d": fmt.Sprint("tail", i)}
			}},
		{"a value just under directValue next to one over", map[string]string{"a": "bytes", "b": "bytes", "c": "int"},
			func(i int) format.Sample {
				return format.Sample{"a": pat(i, directValue-1, 4), "b": pat(i, directValue+3*i, 5), "c": int64(i)}
			}},
		{"a record just under directMin (read whole)", map[string]string{"a": "int", "b": "bytes"},
			func(i int) format.Sample {
				return format.Sample{"a": int64(i), "b": pat(i, directMin-64-i, 6)}
			}},
	}
	h := startAgent(t, 1, nil)
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			remote := filepath.Join(t.TempDir(), "ds")
			w, err := mds.NewWriter(remote, &mds.WriterOptions{Columns: c.cols, SizeLimit: 1 << 18})
			if err != nil {
				t.Fatal(err)
			}
			const n = 40
			want := make([]format.Sample, n)
			for i := range n {
				want[i] = c.make(i)
				if err := w.Write(want[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			fc := dialFeed(t, h.sock)
			var op agentapi.Opened
			fc.call(agentapi.Open{Op: agentapi.OpOpen, Dataset: agentapi.Dataset{Remote: remote, Local: filepath.Join(t.TempDir(), "c"), BatchSize: 8, Shuffle: true}, Job: fmt.Sprint("layout", ci)}, &op)
			var bg agentapi.Begun
			fc.call(agentapi.Begin{Op: agentapi.OpBegin, Handle: op.Handle}, &bg)
			seen := 0
			for {
				v, done := fc.next(bg.Iter, 8)
				if v.Batch.Done {
					break
				}
				for i := range v.Batch.N {
					id := v.Sample(i)
					for k, col := range v.Batch.Columns {
						var exp []byte
						switch x := want[id][col.Name].(type) {
						case int64:
							exp = binary.LittleEndian.AppendUint64(nil, uint64(x))
						case string:
							exp = []byte(x)
						case []byte:
							exp = x
						}
						if got := v.Value(k, i); !bytes.Equal(got, exp) {
							t.Fatalf("sample %d column %s: %d bytes differ from the %d written", id, col.Name, len(got), len(exp))
						}
					}
					seen++
				}
				done()
			}
			if seen != n {
				t.Fatalf("%d samples, want %d", seen, n)
			}
		})
	}
}
