package stream_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/stream"
)

// credBucket reports its objects under an https URL carrying a password,
// as an httpstore opened on https://user:secret@host/ does.
type credBucket struct{ nopBucket }

func (credBucket) URL(key string) string { return "https://user:s3cr3t@example.test/data/" + key }

// TestTarSamplesCarryURL checks that tar samples from Get and from an
// iterator carry WebDataset's __url__ (their shard's URL), with the
// password of the store URL redacted.
func TestTarSamplesCarryURL(t *testing.T) {
	ctx := context.Background()
	files := writeTars(t, 3, 4, 10)
	mb := memstore.New("data")
	for k, b := range files {
		w, err := mb.NewWriter(ctx, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	reg := &storage.Registry{}
	reg.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return credBucket{nopBucket{mb}}, nil })
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data/shard-{000000..000002}.tar", Local: t.TempDir(), Registry: reg, BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	want := func(shard int) string {
		return "https://user:xxxxx@example.test/data/shard-00000" + string(rune('0'+shard)) + ".tar"
	}
	for i := range ds.Len() {
		s, err := ds.Get(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := s[wds.URLField].(string)
		if u != want(int(i/4)) {
			t.Errorf("Get(%d): __url__ %q, want %q", i, u, want(int(i/4)))
		}
		if strings.Contains(u, "s3cr3t") {
			t.Errorf("Get(%d): __url__ %q leaks the password", i, u)
		}
	}
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ep.Iter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for it.Next() {
		s, err := it.Sample()
		if err != nil {
			t.Fatal(err)
		}
		shard, _ := it.Shard()
		if s[wds.URLField] != want(shard) {
			t.Errorf("iterator sample %d: __url__ %v, want %q", n, s[wds.URLField], want(shard))
		}
		n++
	}
	if err := it.Err(); err != nil || n != 12 {
		t.Fatalf("%d samples, err %v; want 12", n, err)
	}
}

// TestCompressedTarShardsNamed: webdataset reads gzip-compressed shards
// ("shard-{000000..000001}.tar.gz", ".tgz"); Sluice serves tars in place
// by byte range and cannot, so it says so and names the shard. Before, a
// single .tar.gz was opened as an MDS directory ("open
// .../shard-000000.tar.gz/index.json: not a directory") and a pattern
// failed with "is not a .tar shard".
func TestCompressedTarShardsNamed(t *testing.T) {
	dir := t.TempDir()
	for k, b := range writeTars(t, 2, 3, 10) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(b)
		zw.Close()
		name := strings.TrimSuffix(k, ".tar") + ".tar.gz"
		if err := os.WriteFile(filepath.Join(dir, name), gz.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, remote := range []string{
		filepath.Join(dir, "shard-000000.tar.gz"),
		filepath.Join(dir, "shard-{000000..000001}.tar.gz"),
		"file://" + filepath.Join(dir, "shard-000001.TGZ"),
		filepath.Join(dir, "shard-000000.tar") + "::" + filepath.Join(dir, "shard-000001.tar.gz"),
	} {
		ds, err := stream.Open(context.Background(), &stream.Options{Remote: remote, Local: t.TempDir(), Registry: stores.Default(), BatchSize: 1})
		if err == nil {
			ds.Close()
			t.Errorf("%s: opened", remote)
			continue
		}
		if !errors.Is(err, stream.ErrBadTarSpec) || !strings.Contains(err.Error(), "compressed tar") || !strings.Contains(err.Error(), "shard-00000") {
			t.Errorf("%s: %v, want ErrBadTarSpec saying which shard is a compressed tar", remote, err)
		}
	}
}
