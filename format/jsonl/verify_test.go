package jsonl_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/jsonl"
)

func TestVerifyShard(t *testing.T) {
	for _, codec := range []string{"", "gz"} {
		samples := []format.Sample{{"s": "a"}, {"s": "b"}, {"s": "c"}}
		cases := map[string]func(t *testing.T, dir string, info *format.ShardInfo){
			"sound": func(*testing.T, string, *format.ShardInfo) {},
			"missing meta": func(t *testing.T, dir string, info *format.ShardInfo) {
				os.Remove(filepath.Join(dir, info.Files()[1].Basename))
			},
			"flipped byte": func(t *testing.T, dir string, info *format.ShardInfo) {
				p := filepath.Join(dir, info.Files()[0].Basename)
				b, _ := os.ReadFile(p)
				b[len(b)-2] ^= 1
				os.WriteFile(p, b, 0o644)
			},
			"wrong raw digest": func(t *testing.T, dir string, info *format.ShardInfo) {
				info.RawData.Hashes["sha1"] = strings.Repeat("0", 40)
			},
			"index newline": func(t *testing.T, dir string, info *format.ShardInfo) {
				info.Newline = "\r\n"
			},
			"bad record": func(t *testing.T, dir string, info *format.ShardInfo) {
				if codec != "" {
					t.Skip("needs a raw data file")
				}
				p := filepath.Join(dir, info.RawData.Basename)
				b, _ := os.ReadFile(p)
				b[0] = '['
				os.WriteFile(p, b, 0o644)
				info.RawData.Hashes = nil
				info.Hashes = nil
			},
		}
		for name, damage := range cases {
			t.Run(codec+"/"+name, func(t *testing.T) {
				dir := write(t, &jsonl.WriterOptions{Columns: map[string]string{"s": "str"}, Compression: codec, Hashes: []string{"sha1"}}, samples)
				info := readIndex(t, dir).Shards[0]
				damage(t, dir, &info)
				files, n, err := jsonl.VerifyShard(dir, 0, &info)
				if name == "sound" {
					if err != nil || files != 2 || n == 0 {
						t.Fatalf("sound shard: %d files, %d bytes, %v", files, n, err)
					}
					return
				}
				var ce *format.CorruptError
				if !errors.As(err, &ce) || ce.Shard != 0 {
					t.Fatalf("%s: %v, want a CorruptError for shard 0", name, err)
				}
			})
		}
	}
}
