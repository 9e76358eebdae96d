package format_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
)

// skelEntry is a MosaicML-like entry; %s marks where variations go.
const skelEntry = `{"column_encodings": ["str", "int", "bytes"], "column_names": ["text", "id", "tokens"], "column_sizes": [null, 8, null], "compression": "zstd", "format": "mds", "hashes": [], "raw_data": {"basename": "shard.00000.mds", "bytes": 67000000, "hashes": {}}, "samples": 4000, "size_limit": 67108864, "version": 2, "zip_data": {"basename": "shard.00000.mds.zstd", "bytes": 21000000, "hashes": {}}}`

// skelVariants are edits of the entry that follows an accepted one: of
// the values the skeleton cuts out (valid or not), and of the text it
// compares.
var skelVariants = [][2]string{
	{`"samples": 4000`, `"samples": 7`},
	{`"samples": 4000`, `"samples": 0`},
	{`"samples": 4000`, `"samples": 00`},
	{`"samples": 4000`, `"samples": 012`},
	{`"samples": 4000`, `"samples": -1`},
	{`"samples": 4000`, `"samples": 1.0`},
	{`"samples": 4000`, `"samples": 1e2`},
	{`"samples": 4000`, `"samples": 1073741824`},
	{`"samples": 4000`, `"samples": 1073741825`},
	{`"samples": 4000`, `"samples": 999999999999999999999999`},
	{`"samples": 4000`, `"samples": "4000"`},
	{`"samples": 4000`, `"samples": null`},
	{`"samples": 4000`, `"samples":4000`},
	{`"samples": 4000`, `"samples": 4000, "samples": 5`},
	{`"samples": 4000`, `"samples": `},
	{`"basename": "shard.00000.mds"`, `"basename": "shard.00001.mds"`},
	{`"basename": "shard.00000.mds"`, `"basename": "s"`},
	{`"basename": "shard.00000.mds"`, `"basename": ""`},
	{`"basename": "shard.00000.mds"`, `"basename": "a/../b"`},
	{`"basename": "shard.00000.mds"`, `"basename": "../b"`},
	{`"basename": "shard.00000.mds"`, `"basename": "/abs"`},
	{`"basename": "shard.00000.mds"`, `"basename": "c:x"`},
	{`"basename": "shard.00000.mds"`, `"basename": "d/./e"`},
	{`"basename": "shard.00000.mds"`, `"basename": "sub/shard.mds"`},
	{`"basename": "shard.00000.mds"`, `"basename": "x\u0041y"`},
	{`"basename": "shard.00000.mds"`, `"basename": "x\\y"`},
	{`"basename": "shard.00000.mds"`, `"basename": "x` + "\x01" + `y"`},
	{`"basename": "shard.00000.mds"`, `"basename": "é/ü"`},
	{`"basename": "shard.00000.mds"`, `"basename": "x` + "\xff" + `"`},
	{`"basename": "shard.00000.mds"`, `"basename": 5`},
	{`"basename": "shard.00000.mds"`, `"basename": "unterminated`},
	{`"bytes": 67000000`, `"bytes": 0`},
	{`"bytes": 67000000`, `"bytes": 4398046511104`},
	{`"bytes": 67000000`, `"bytes": 4398046511105`},
	{`"bytes": 67000000`, `"bytes": 05`},
	{`"bytes": 67000000`, `"bytes": -5`},
	{`"bytes": 67000000`, `"bytes": 6.7e7`},
	{`"bytes": 67000000`, `"bytes": 67000000, "bytes": 3`},
	{`"bytes": 21000000`, `"bytes": 1`},
	{`"basename": "shard.00000.mds.zstd"`, `"basename": "z"`},
	{`"hashes": {}}, "samples"`, `"hashes": {"sha1": "ab"}}, "samples"`},
	{`"hashes": {}}}`, `"hashes": {"md5": "x\u00e9"}}}`},
	{`"hashes": {}}}`, `"hashes": null}}`},
	{`"zip_data": {"basename": "shard.00000.mds.zstd", "bytes": 21000000, "hashes": {}}`, `"zip_data": null`},
	{`"compression": "zstd"`, `"compression": null`},
	{`"compression": "zstd"`, `"compression": "gz"`},
	{`"format": "mds"`, `"format": "json"`},
	{`"version": 2`, `"version": 3`},
	{`"size_limit": 67108864`, `"size_limit": 1`},
	{`"column_sizes": [null, 8, null]`, `"column_sizes": [null, 8, nul]`},
	{`{"column_encodings"`, `{"x": 1, "column_encodings"`},
	{`{"column_encodings"`, `{ "column_encodings"`},
	{`"raw_data": {"basename"`, `"raw_data": {"bytes": 1, "basename"`},
	{`"raw_data": {`, `"raw_data": {"basename": "q", "bytes": 1}, "raw_data": {`},
	{`}}`, `}} `},
	{`}}`, `}`},
}

// TestIndexSkeleton parses indexes whose entries follow an accepted one
// with a variation, every way there is (bytes, streamed in one-byte and
// seven-byte pieces), against the reference tree parser: the fast path
// for entries that repeat the last one's shape must accept, reject and
// return exactly what the full parser does.
func TestIndexSkeleton(t *testing.T) {
	entry := func(k int) string {
		e := strings.ReplaceAll(skelEntry, "00000", fmt.Sprintf("%05d", k))
		return strings.Replace(e, `"samples": 4000`, fmt.Sprintf(`"samples": %d`, 4000+k), 1)
	}
	wrap := func(shards ...string) []byte {
		return []byte(`{"shards": [` + strings.Join(shards, ", ") + `], "version": 2}`)
	}
	for _, v := range skelVariants {
		if !strings.Contains(skelEntry, v[0]) {
			t.Fatalf("variant %q: not in the entry", v[0])
		}
		varied := strings.Replace(skelEntry, v[0], v[1], 1)
		for _, b := range [][]byte{
			wrap(entry(0), varied),
			wrap(entry(0), entry(1), varied, entry(2), entry(3)),
			wrap(varied, entry(1), entry(2)),
			wrap(varied, varied, varied),
		} {
			parseAll(t, b)
		}
	}
	// A long run, some entries varied, read in windows that end inside
	// entries.
	var shards []string
	for k := range 3000 {
		e := entry(k)
		if k%97 == 5 {
			v := skelVariants[(k/97)%len(skelVariants)]
			if v[1] != `}` && !strings.Contains(v[1], "unterminated") && !strings.Contains(v[1], "nul]") {
				e = strings.Replace(e, strings.ReplaceAll(v[0], "00000", fmt.Sprintf("%05d", k)), v[1], 1)
			}
		}
		shards = append(shards, e)
	}
	idx, err := parseAll(t, wrap(shards...))
	if err != nil {
		t.Logf("long run rejected (as by the reference parser): %v", err)
	} else if len(idx.Shards) != 3000 {
		t.Fatalf("%d shards", len(idx.Shards))
	}
}

// FuzzIndexSkeleton fuzzes the entry that follows an accepted one (and
// the one that follows it), where the fast path for repeated entries
// runs, against the reference parser.
func FuzzIndexSkeleton(f *testing.F) {
	for _, v := range skelVariants[:12] {
		f.Add(strings.Replace(skelEntry, v[0], v[1], 1))
	}
	f.Add(skelEntry)
	f.Fuzz(func(t *testing.T, e string) {
		b := []byte(`{"shards": [` + skelEntry + `, ` + e + `, ` + skelEntry + `], "version": 2}`)
		parseAll(t, b)
		_, err := format.ParseCompactIndex(b)
		_ = err
	})
}
