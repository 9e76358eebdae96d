package mds

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/format"
)

// copyTree copies the fixture's files (without the root index) to dst.
func copyTree(t *testing.T, src, dst string, skipRootIndex bool) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if skipRootIndex && rel == "index.json" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMergeFixtureIdentical(t *testing.T) {
	src := filepath.Join(fixturesDir, "merged", "data")
	want, err := os.ReadFile(filepath.Join(src, "index.json"))
	if err != nil {
		t.Skipf("fixture missing: %v", err)
	}
	dir := t.TempDir()
	copyTree(t, src, dir, true)
	if _, err := Merge(dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("merged index differs\n got %s\nwant %s", got, want)
	}
	// Merging again (root index present) gives the same result and keeps
	// every sub-dataset.
	if _, err := Merge(dir); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	if !bytes.Equal(again, want) {
		t.Fatal("second merge differs")
	}
	for _, p := range []string{"part0/index.json", "part1/shard.00001.mds.zstd"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("merge removed %s: %v", p, err)
		}
	}
	r, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != 51 {
		t.Fatalf("merged dataset has %d samples", r.Len())
	}
}

func TestMergeOrderIsLexical(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"2", "10", "1"} {
		w, err := NewWriter(filepath.Join(dir, d), &WriterOptions{Columns: map[string]string{"d": "str"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(format.Sample{"d": d}); err != nil {
			t.Fatal(err)
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := Merge(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range idx.Shards {
		got = append(got, s.RawData.Basename)
	}
	want := []string{"1/shard.00000.mds", "10/shard.00000.mds", "2/shard.00000.mds"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	if _, err := Merge(t.TempDir()); err == nil {
		t.Error("merging an empty directory succeeded")
	}
}

func TestVerifyHeaderMismatch(t *testing.T) {
	src := filepath.Join(fixturesDir, "mixed_none", "data")
	if _, err := os.Stat(src); err != nil {
		t.Skip("fixture missing")
	}
	dir := t.TempDir()
	copyTree(t, src, dir, false)
	p := filepath.Join(dir, "shard.00002.mds")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(`"blob"`))
	copy(b[i:], `"blub"`) // same length: offsets stay valid
	os.WriteFile(p, b, 0o644)
	var problems []string
	st, err := Verify(t.Context(), dir, func(err error) { problems = append(problems, err.Error()) })
	if err != nil {
		t.Fatal(err)
	}
	if st.Problems != 1 || len(problems) != 1 || !bytes.Contains([]byte(problems[0]), []byte("shard 2: offset")) || !bytes.Contains([]byte(problems[0]), []byte("header columns")) {
		t.Fatalf("problems: %v", problems)
	}
}

// TestReaderConcurrent reads every sample of a multi-shard dataset from
// several goroutines at once.
func TestReaderConcurrent(t *testing.T) {
	r, err := Open(filepath.Join(fixturesDir, "mixed_zstd", "data"), nil)
	if err != nil {
		t.Skip(err)
	}
	defer r.Close()
	done := make(chan error)
	for g := 0; g < 4; g++ {
		go func() {
			for i := int64(0); i < r.Len(); i++ {
				if _, err := r.Sample((i + int64(g)*7) % r.Len()); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
