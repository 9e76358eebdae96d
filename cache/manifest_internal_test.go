package cache

import (
	"encoding/json"
	"testing"
)

// TestAppendManifest checks the manifest's direct encoding against
// json.Marshal of the manifest built the way it was before (so an
// existing manifest compares equal and is not rewritten), names with
// characters json.Marshal escapes included.
func TestAppendManifest(t *testing.T) {
	names := []string{"shard.00000.mds", "", "a/b c", `q"uote`, `back\slash`, "<&>", "tab\t", "é", "\xff", "\u2028", "x\x7f"}
	for _, dir := range []string{"", "ds", "a/<b>"} {
		for n := range 4 {
			var shards []Shard
			for i := range n {
				sh := Shard{}
				for j := range i {
					sh.Files = append(sh.Files, File{Raw: names[(i+j)%len(names)], Zip: names[(i*3+j)%len(names)]})
				}
				shards = append(shards, sh)
			}
			m := manifest{Dir: dir}
			for _, sh := range shards {
				var files [][2]string
				for _, f := range sh.Files {
					files = append(files, [2]string{f.Raw, f.Zip})
				}
				m.Shards = append(m.Shards, files)
			}
			want, err := json.Marshal(&m)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendManifest(nil, dir, shards); string(got) != string(want) {
				t.Fatalf("dir %q, %d shards:\n got %s\nwant %s", dir, n, got, want)
			}
		}
	}
	for _, s := range names {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	}
}
