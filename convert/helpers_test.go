package convert

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/storage/httpstore"
)

func testRegistry() *storage.Registry {
	r := &storage.Registry{}
	r.Register("file", filestore.Open)
	r.Register("http", httpstore.Open)
	r.Register("https", httpstore.Open)
	return r
}

func runConvert(t testing.TB, opts *Options) *Report {
	t.Helper()
	if opts.Registry == nil {
		opts.Registry = testRegistry()
	}
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatalf("convert %s: %v", opts.Input, err)
	}
	return rep
}

// readDataset decodes every sample of the MDS dataset in dir.
func readDataset(t testing.TB, dir string) []format.Sample {
	t.Helper()
	r, err := mds.Open(dir, nil)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer r.Close()
	var out []format.Sample
	sc := r.Scan(0)
	defer sc.Close()
	for sc.Next() {
		out = append(out, sc.Sample())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan %s: %v", dir, err)
	}
	return out
}

// dirFiles returns every file under dir (relative name → content),
// skipping nothing: tests compare whole outputs.
func dirFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameDataFiles fails unless a and b hold the same shard and index files
// (reports differ in timings and are left out).
func sameDataFiles(t testing.TB, a, b string) {
	t.Helper()
	fa, fb := dirFiles(t, a), dirFiles(t, b)
	for _, m := range []map[string][]byte{fa, fb} {
		for k := range m {
			if filepath.Base(k) == ReportFile || bytes.HasPrefix([]byte(filepath.Base(k)), []byte(ReportPartPrefix)) {
				delete(m, k)
			}
		}
	}
	var names []string
	for k := range fa {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(fa) != len(fb) {
		var nb []string
		for k := range fb {
			nb = append(nb, k)
		}
		sort.Strings(nb)
		t.Fatalf("file sets differ:\n%v\n%v", names, nb)
	}
	for _, k := range names {
		if !bytes.Equal(fa[k], fb[k]) {
			t.Fatalf("file %s differs (%d vs %d bytes)", k, len(fa[k]), len(fb[k]))
		}
	}
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// jsonlRecords makes n small JSON records.
func jsonlRecords(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"id": %d, "text": "record number %d with some words in it \u00e9", "score": %d.5, "tags": ["a", %d]}`+"\n", i, i, i%100, i%7)
	}
	return b.Bytes()
}

func runConvertErr(t testing.TB, opts *Options) (*Report, error) {
	t.Helper()
	if opts.Registry == nil {
		opts.Registry = testRegistry()
	}
	return Run(context.Background(), opts)
}

func readDatasetErr(dir string) (int64, error) {
	r, err := mds.Open(dir, nil)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return r.Len(), nil
}

// loopbackNets allows fetching from the tests' 127.0.0.1 servers.
var loopbackNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
