package format_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
)

// TestCompactAccessors checks the compact index's per-shard accessors
// (SharedShard, File, FileHash, Config, ConfigInfo) against Index() on
// the fixtures and on indexes with split formats, digests and several
// configurations.
func TestCompactAccessors(t *testing.T) {
	texts := [][]byte{bigIndex(30)}
	for _, p := range fixtureIndexes(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, b)
	}
	jsonShard := `{"columns": {"a": "int", "b": "str"}, "compression": "zstd", "format": "json", "hashes": ["sha1"], "newline": "\n", "raw_data": {"basename": "shard.00001.json", "bytes": 5, "hashes": {"sha1": "ab", "md5": "cd"}}, "raw_meta": {"basename": "shard.00001.json.meta", "bytes": 29, "hashes": null}, "samples": 3, "size_limit": 100, "version": 2, "zip_data": {"basename": "shard.00001.json.zstd", "bytes": 4, "hashes": {"sha1": "zz"}}, "zip_meta": {"basename": "m", "bytes": 1}}`
	mds := strings.TrimSuffix(strings.TrimPrefix(string(bigIndex(1)), `{"shards": [`), `], "version": 2}`)
	texts = append(texts, []byte(`{"shards": [`+mds+`, `+jsonShard+`, `+mds+`], "version": 2}`))
	for n, b := range texts {
		c, err := format.ParseCompactIndex(b)
		if err != nil {
			t.Fatal(err)
		}
		idx := c.Index()
		for i := range c.Len() {
			want := idx.Shards[i]
			if got := c.SharedShard(i); !reflect.DeepEqual(got, want) {
				t.Fatalf("index %d shard %d: SharedShard %+v, want %+v", n, i, got, want)
			}
			files := []*format.FileInfo{&want.RawData, want.ZipData, want.RawMeta, want.ZipMeta}
			for kind, fi := range files {
				name, size, ok := c.File(i, kind)
				if ok != (fi != nil) || (ok && (name != fi.Basename || size != fi.Bytes)) {
					t.Fatalf("index %d shard %d kind %d: File %q %d %v, want %+v", n, i, kind, name, size, ok, fi)
				}
				for _, algo := range []string{"sha1", "md5", "xxh64"} {
					w := ""
					if fi != nil {
						w = fi.Hashes[algo]
					}
					if got := c.FileHash(i, kind, algo); got != w {
						t.Fatalf("index %d shard %d kind %d: FileHash(%s) %q, want %q", n, i, kind, algo, got, w)
					}
				}
			}
			cfg := *c.ConfigInfo(c.Config(i))
			cfg.Version, cfg.Samples = want.Version, want.Samples
			cfg.RawData, cfg.ZipData, cfg.RawMeta, cfg.ZipMeta = want.RawData, want.ZipData, want.RawMeta, want.ZipMeta
			if !reflect.DeepEqual(cfg, want) {
				t.Fatalf("index %d shard %d: ConfigInfo %+v, want %+v", n, i, cfg, want)
			}
			if i > 0 && (c.Config(i) == c.Config(i-1)) != reflect.DeepEqual(*c.ConfigInfo(c.Config(i)), *c.ConfigInfo(c.Config(i - 1))) {
				t.Fatalf("index %d shard %d: configuration numbers disagree with their contents", n, i)
			}
		}
	}
}
