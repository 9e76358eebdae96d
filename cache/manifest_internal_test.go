package cache

import (
	"encoding/json"
	"testing"
)

// TestAppendManifest checks the manifest's direct encoding against
// json.Marshal of the manifest built the way it was before (so an
// existing manifest compares equal and is not rewritten), names with
// characters json.Marshal escapes included, and that manifestIs accepts
// exactly that encoding.
func TestAppendManifest(t *testing.T) {
	names := []string{"shard.00000.mds", "", "a/b c", `q"uote`, `back\slash`, "<&>", "tab\t", "é", "\xff", "\u2028", "x\x7f"}
	for _, dir := range []string{"", "ds", "a/<b>"} {
		// Shard i of the first four lists has i files; the last has 60
		// shards of one or two files, compared in pieces.
		for n := range 5 {
			var shards []Shard
			count, files := n, func(i int) int { return i }
			if n == 4 {
				count, files = 60, func(i int) int { return 1 + i%2 }
			}
			for i := range count {
				sh := Shard{}
				for j := range files(i) {
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
				t.Fatalf("dir %q, list %d:\n got %s\nwant %s", dir, n, got, want)
			}
			if !manifestIs(want, dir, shards) {
				t.Fatalf("dir %q, list %d: manifestIs rejects the manifest", dir, n)
			}
			// Any other bytes are another manifest: one byte changed,
			// dropped or added anywhere.
			for i := range want {
				other := append([]byte(nil), want...)
				other[i] ^= 1
				if manifestIs(other, dir, shards) || manifestIs(want[:i], dir, shards) ||
					manifestIs(append(append(append([]byte(nil), want[:i]...), ' '), want[i:]...), dir, shards) {
					t.Fatalf("dir %q, list %d: manifestIs accepts the manifest changed at byte %d", dir, n, i)
				}
			}
			if manifestIs(append(append([]byte(nil), want...), '\n'), dir, shards) {
				t.Fatalf("dir %q, list %d: manifestIs accepts a byte added at the end", dir, n)
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
