package wds_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/sluicedata/sluice/format/wds"
)

// BenchmarkOpenShardBytes indexes a 64 MB archive of 20 KB samples held
// in memory (the fast header path) and through archive/tar.
func BenchmarkOpenShardBytes(b *testing.B) {
	var buf bytes.Buffer
	w := wds.NewWriter(&buf)
	n := 0
	for buf.Len() < 64<<20 {
		w.Write(fmt.Sprintf("s%08d", n), map[string][]byte{"jpg": make([]byte, 20<<10), "cls": []byte("7")})
		n++
	}
	w.Close()
	data := buf.Bytes()
	for _, fast := range []bool{true, false} {
		name := "fast"
		if !fast {
			name = "archive-tar"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var sh *wds.Shard
				var err error
				if fast {
					sh, err = wds.OpenShardBytes(data, nil)
				} else {
					sh, err = wds.OpenShard(bytes.NewReader(data), int64(len(data)), nil)
				}
				if err != nil || sh.Len() != n {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
		})
	}
}

// BenchmarkScan summarises a 64 MB archive of 20 KB samples through a
// seekable stream (the index build's path, without the store), digest
// included.
func BenchmarkScan(b *testing.B) {
	var buf bytes.Buffer
	w := wds.NewWriter(&buf)
	n := 0
	for buf.Len() < 64<<20 {
		w.Write(fmt.Sprintf("s%08d", n), map[string][]byte{"jpg": make([]byte, 20<<10), "cls": []byte("7")})
		n++
	}
	w.Close()
	data := buf.Bytes()
	for _, inPlace := range []bool{false, true} {
		name := "read"
		if inPlace {
			name = "in-place"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r io.Reader = bytes.NewReader(data)
				if inPlace {
					r = &inPlaceReader{Reader: bytes.NewReader(data), data: data}
				}
				s, err := wds.Scan(r, nil)
				if err != nil || s.Samples != n {
					b.Fatal(s, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/tar")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
		})
	}
}
