package mds

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
)

// fixtureShards returns raw shard files of the fixtures, for fuzz seeds.
func fixtureShards(f *testing.F) [][]byte {
	var out [][]byte
	for _, name := range []string{"scalars", "ndarray", "images", "text_bytes_json", "pkl", "fixed_only", "empty_first_shard"} {
		dir := filepath.Join(fixturesDir, name, "data")
		b, err := os.ReadFile(filepath.Join(dir, "index.json"))
		if err != nil {
			continue
		}
		idx, err := format.ParseIndex(b)
		if err != nil {
			f.Fatal(err)
		}
		s := idx.Shards[0]
		if s.ZipData == nil {
			raw, err := os.ReadFile(filepath.Join(dir, s.RawData.Basename))
			if err == nil {
				out = append(out, raw)
			}
			continue
		}
		zb, err := os.ReadFile(filepath.Join(dir, s.ZipData.Basename))
		if err != nil {
			continue
		}
		if raw, err := compress.Decompress(s.Family(), zb, s.RawData.Bytes); err == nil {
			out = append(out, raw)
		}
	}
	return out
}

// FuzzShard opens arbitrary bytes as a shard (columns from its own header)
// and decodes every sample: it must never panic or allocate beyond the
// input's size.
func FuzzShard(f *testing.F) {
	for _, b := range fixtureShards(f) {
		if len(b) < 64<<10 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := OpenBytes(b, nil)
		if err != nil {
			return
		}
		for j := 0; j < s.Len(); j++ {
			s.Sample(j)
			AppendDump(nil, int64(j), 0, s, j)
		}
	})
}

// FuzzDecode decodes arbitrary bytes with every encoding; values that
// decode must re-encode to the same bytes for the lossless encodings.
func FuzzDecode(f *testing.F) {
	for _, b := range fixtureShards(f) {
		s, err := OpenBytes(b, nil)
		if err != nil {
			continue
		}
		for j := 0; j < s.Len() && j < 3; j++ {
			rec, _ := s.Record(j)
			cols, _ := s.Columns(j, rec, nil)
			for c, v := range cols {
				if len(v) < 16<<10 {
					f.Add(uint8(indexOf(s.cols[c].String())), v)
				}
			}
		}
	}
	f.Add(uint8(0), []byte("x"))
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		es := allEncodings[int(which)%len(allEncodings)]
		e, err := ParseEncoding(es)
		if err != nil {
			t.Fatal(err)
		}
		v, err := e.Decode(b)
		if err != nil {
			return
		}
		switch e.kind {
		case kJPEG, kPNG, kJPEGArray, kListJPEG, kListPNG, kStrInt, kStrFloat:
			return // lossy or not canonical: re-encoding may differ
		}
		again, err := e.Append(nil, v)
		if err != nil {
			t.Fatalf("%s: decoded %#v does not re-encode: %v", es, v, err)
		}
		// Scalars, strings, bytes and fixed layouts are canonical; a dynamic
		// ndarray may have used a wider shape code than needed.
		if (e.kind != kNDArray || e.shape != nil) && string(again) != string(b) {
			t.Fatalf("%s: re-encoded %x, input %x", es, again, b)
		}
		v2, err := e.Decode(again)
		if err != nil {
			t.Fatalf("%s: re-encoded value does not decode: %v", es, err)
		}
		if again2, err := e.Append(nil, v2); err != nil || string(again2) != string(again) {
			t.Fatalf("%s: encoding is not stable: %x vs %x (%v)", es, again2, again, err)
		}
	})
}

func indexOf(enc string) int {
	for i, e := range allEncodings {
		if e == enc {
			return i
		}
	}
	return 0
}
