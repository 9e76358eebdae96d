package format_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
)

// TestSamplesMustFitTheirOffsets: an entry claiming more samples than
// its file of offsets can hold (an MDS shard's raw file, a JSON or CSV
// shard's meta file: the count and samples+1 u32 offsets take
// 4·samples+8 bytes) is corrupt, from every parser (the one-entry-at-a-
// time scan, and the repeated-entry skeleton from the second entry on).
// Before, a 935-byte shard claiming 2^30 samples had `sluice stream`
// allocate 8 GiB for its plan and die out of memory.
func TestSamplesMustFitTheirOffsets(t *testing.T) {
	entry := func(i, samples int, bytes int64) string {
		return fmt.Sprintf(`{"column_encodings": ["int"], "column_names": ["id"], "column_sizes": [8], "compression": null, "format": "mds", "hashes": [], "raw_data": {"basename": "shard.%05d.mds", "bytes": %d, "hashes": {}}, "samples": %d, "size_limit": null, "version": 2, "zip_data": null}`, i, bytes, samples)
	}
	jsonEntry := func(i, samples int, metaBytes int64) string {
		return fmt.Sprintf(`{"columns": {"a": "int"}, "compression": null, "format": "json", "hashes": [], "newline": "\n", "raw_data": {"basename": "shard.%05d.json", "bytes": 100000, "hashes": {}}, "raw_meta": {"basename": "shard.%05d.json.meta", "bytes": %d, "hashes": {}}, "samples": %d, "size_limit": null, "version": 2, "zip_data": null, "zip_meta": null}`, i, i, metaBytes, samples)
	}
	index := func(entries ...string) []byte {
		return []byte(`{"shards": [` + strings.Join(entries, ", ") + `], "version": 2}`)
	}
	for _, tt := range []struct {
		name    string
		entries []string
		bad     int // shard named in the error; -1: accepted
	}{
		{"fits exactly", []string{entry(0, 24, 4*24+8)}, -1},
		{"empty shard", []string{entry(0, 0, 8)}, -1},
		{"one byte short", []string{entry(0, 24, 4*24+7)}, 0},
		{"2^30 in 935 bytes", []string{entry(0, 1<<30, 935)}, 0},
		{"second of a run (skeleton)", []string{entry(0, 24, 935), entry(1, 1<<30, 935), entry(2, 24, 935)}, 1},
		{"third of a run (skeleton)", []string{entry(0, 24, 935), entry(1, 24, 935), entry(2, 300, 935)}, 2},
		{"json fits", []string{jsonEntry(0, 10, 48), jsonEntry(1, 10, 48)}, -1},
		{"json meta short", []string{jsonEntry(0, 10, 47)}, 0},
		{"json meta short (skeleton)", []string{jsonEntry(0, 10, 48), jsonEntry(1, 1<<30, 48)}, 1},
	} {
		_, err := format.ParseIndex(index(tt.entries...))
		if tt.bad < 0 {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("shard %d:", tt.bad)) ||
			!strings.Contains(err.Error(), "cannot fit") {
			t.Errorf("%s: %v, want ErrCorrupt naming shard %d", tt.name, err, tt.bad)
		}
		if _, err := format.ParseCompactIndex(index(tt.entries...)); !errors.Is(err, format.ErrCorrupt) {
			t.Errorf("%s: ParseCompactIndex: %v", tt.name, err)
		}
	}
}
