package stream_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
	"github.com/sluicedata/sluice/stream"
)

// wdsFixtures is the directory of the reference WebDataset fixtures.
func wdsFixtures(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "fixtures", "wds")
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("reference fixtures missing: %v", err)
		}
		t.Skipf("reference fixtures missing: %v", err)
	}
	return dir
}

type wdsExpected struct {
	Key    string `json:"key"`
	URL    string `json:"url"`
	Fields map[string]struct {
		RawLen    int    `json:"raw_len"`
		RawSHA256 string `json:"raw_sha256"`
	} `json:"fields"`
}

func readExpected(t testing.TB, path string) []wdsExpected {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []wdsExpected
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var e wdsExpected
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// memTars uploads files (key → bytes) to a memstore reachable as mem://data.
func memTars(t testing.TB, files map[string][]byte) (*storage.Registry, storage.Bucket) {
	t.Helper()
	mb := memstore.New("data")
	for k, b := range files {
		w, err := mb.NewWriter(context.Background(), k, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	r := &storage.Registry{}
	r.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return nopBucket{mb}, nil })
	return r, mb
}

// nopBucket keeps the shared memstore open when a dataset closes it.
type nopBucket struct{ storage.Bucket }

func (nopBucket) Close() error { return nil }

func TestTarFixturesThroughGet(t *testing.T) {
	root := wdsFixtures(t)
	for _, name := range []string{"images", "mixed", "gnutar_pax"} {
		t.Run(name, func(t *testing.T) {
			var meta struct {
				URLs string `json:"urls"`
			}
			b, err := os.ReadFile(filepath.Join(root, name, "meta.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &meta); err != nil {
				t.Fatal(err)
			}
			files := map[string][]byte{}
			tars, _ := filepath.Glob(filepath.Join(root, name, "data", "*.tar"))
			for _, p := range tars {
				files[filepath.Base(p)], _ = os.ReadFile(p)
			}
			reg, _ := memTars(t, files)
			ds, err := stream.Open(context.Background(), &stream.Options{
				Remote: "mem://data/" + strings.TrimPrefix(meta.URLs, "data/"), Local: t.TempDir(), Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			want := readExpected(t, filepath.Join(root, name, "expected.jsonl"))
			if ds.Len() != int64(len(want)) {
				t.Fatalf("%d samples, want %d", ds.Len(), len(want))
			}
			for i, w := range want {
				s, err := ds.Get(context.Background(), int64(i))
				if err != nil {
					t.Fatal(err)
				}
				if s[wds.KeyField] != w.Key {
					t.Errorf("sample %d: key %q, want %q", i, s[wds.KeyField], w.Key)
				}
				if u := "mem://data/" + w.URL; s[wds.URLField] != u {
					t.Errorf("sample %d: __url__ %q, want %q", i, s[wds.URLField], u)
				}
				if len(s) != len(w.Fields)+2 {
					t.Errorf("sample %d: %d fields, want %d", i, len(s)-2, len(w.Fields))
				}
				for f, wf := range w.Fields {
					v, _ := s[f].([]byte)
					sum := sha256.Sum256(v)
					if len(v) != wf.RawLen || hex.EncodeToString(sum[:]) != wf.RawSHA256 {
						t.Errorf("sample %d field %q: %d bytes %x, want %d %s", i, f, len(v), sum, wf.RawLen, wf.RawSHA256)
					}
				}
			}
		})
	}
}

// writeTars writes shards tars of per samples each (keys "s%06d", fields
// jpg and cls) and returns them by name.
func writeTars(t testing.TB, shards, per, payload int) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for k := range shards {
		var buf strings.Builder
		w := wds.NewWriter(&buf)
		for j := range per {
			id := k*per + j
			body := make([]byte, payload)
			for i := range body {
				body[i] = byte(id + i)
			}
			if err := w.Write(fmt.Sprintf("s%06d", id), map[string][]byte{"jpg": body, "cls": []byte(fmt.Sprint(id))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("shard-%06d.tar", k)] = []byte(buf.String())
	}
	return out
}

func tarSampleID(t testing.TB, s format.Sample) int64 {
	t.Helper()
	var id int64
	if _, err := fmt.Sscanf(string(s["cls"].([]byte)), "%d", &id); err != nil {
		t.Fatal(err)
	}
	if s[wds.KeyField] != fmt.Sprintf("s%06d", id) {
		t.Fatalf("key %v does not match cls %d", s[wds.KeyField], id)
	}
	return id
}

// TestTarExactlyOnceUnderLimit streams tars through a cache smaller than
// the data on 1, 2 and 4 ranks with 1 and 2 workers: every sample once.
func TestTarExactlyOnceUnderLimit(t *testing.T) {
	const shards, per, payload = 12, 20, 1000
	files := writeTars(t, shards, per, payload)
	var shardBytes int64
	var total int64
	for _, b := range files {
		shardBytes = max(shardBytes, int64(len(b)))
		total += int64(len(b))
	}
	reg, _ := memTars(t, files)
	ctx := context.Background()
	for _, ranks := range []int{1, 2, 4} {
		for _, workers := range []int{1, 2} {
			t.Run(fmt.Sprintf("ranks%d-workers%d", ranks, workers), func(t *testing.T) {
				dir := t.TempDir()
				limit := int64(ranks*workers+2)*shardBytes + 64<<10
				if limit >= total {
					t.Fatalf("limit %d not under the data size %d", limit, total)
				}
				c, err := cache.Open(ctx, dir, &cache.Options{Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				var mu sync.Mutex
				seen := map[int64]int{}
				var wg sync.WaitGroup
				for r := range ranks {
					ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data/shard-{000000..000011}.tar",
						Registry: reg, Cache: c, Shuffle: true, BatchSize: 4, Predownload: 8})
					if err != nil {
						t.Fatal(err)
					}
					defer ds.Close()
					ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: ranks, Rank: r}, workers)
					if err != nil {
						t.Fatal(err)
					}
					for wk := range workers {
						it, err := ep.Iter(ctx, wk)
						if err != nil {
							t.Fatal(err)
						}
						wg.Add(1)
						go func() {
							defer wg.Done()
							defer it.Close()
							for it.Next() {
								s, err := it.Sample()
								if err != nil {
									t.Error(err)
									return
								}
								id := tarSampleID(t, s)
								mu.Lock()
								seen[id]++
								mu.Unlock()
							}
							if err := it.Err(); err != nil {
								t.Error(err)
							}
						}()
					}
				}
				wg.Wait()
				for id := range int64(shards * per) {
					if seen[id] != 1 {
						t.Errorf("sample %d delivered %d times", id, seen[id])
					}
				}
			})
		}
	}
}

// TestTarResumeOnAnotherWorld stops 4 ranks mid-epoch and resumes on 3.
func TestTarResumeOnAnotherWorld(t *testing.T) {
	ctx := context.Background()
	const shards, per = 12, 20
	reg, _ := memTars(t, writeTars(t, shards, per, 100))
	open := func() *stream.Dataset {
		ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data/shard-{000000..000011}.tar::", Local: t.TempDir(),
			Registry: reg, BatchSize: 8, Shuffle: true, NumCanonicalNodes: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ds.Close() })
		return ds
	}
	seen := map[int64]int{}
	var state plan.State
	for r := range 4 {
		ds := open()
		ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 4, RanksPerNode: 1, Rank: r}, 1)
		if err != nil {
			t.Fatal(err)
		}
		it, err := ep.RankIter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for it.Yielded() < 3*8 && it.Next() {
			s, err := it.Sample()
			if err != nil {
				t.Fatal(err)
			}
			seen[tarSampleID(t, s)]++
		}
		it.Close()
		if state, err = ds.State(it.Yielded()); err != nil {
			t.Fatal(err)
		}
	}
	if state.SampleInEpoch != 96 {
		t.Fatalf("state %+v: want sample_in_epoch 96", state)
	}
	for r := range 3 {
		ds := open()
		if err := ds.Load(state); err != nil {
			t.Fatal(err)
		}
		ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 3, Rank: r}, 2)
		if err != nil {
			t.Fatal(err)
		}
		it, err := ep.RankIter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			s, err := it.Sample()
			if err != nil {
				t.Fatal(err)
			}
			seen[tarSampleID(t, s)]++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		it.Close()
	}
	for id := range int64(shards * per) {
		if seen[id] != 1 {
			t.Errorf("sample %d delivered %d times across the stop and resume", id, seen[id])
		}
	}
}

// TestTarIndexBesideShards: an index written beside the shards is used
// (no shard is read to open), a subset pattern selects its entries, and a
// split key is an error naming both shards.
func TestTarIndexBesideShards(t *testing.T) {
	ctx := context.Background()
	files := writeTars(t, 4, 5, 100)
	reg, mb := memTars(t, files)
	idx, err := stream.BuildTarIndex(ctx, mb, []string{"shard-000000.tar", "shard-000001.tar", "shard-000002.tar", "shard-000003.tar"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range idx.Shards {
		if s.Samples != 5 || s.RawData.Bytes != int64(len(files[s.RawData.Basename])) || len(s.RawData.Hashes[wds.HeaderDigest]) != 32 {
			t.Fatalf("shard %d: %+v", i, s)
		}
	}
	w, _ := mb.NewWriter(ctx, format.IndexFile, nil)
	w.Write(format.AppendIndex(nil, idx))
	w.Close()
	subLocal := t.TempDir()
	ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data/shard-{000002,000001}.tar", Local: subLocal, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if w := ds.OpenWarnings(); len(w) != 0 {
		t.Errorf("an open selecting from the index beside the shards warned %q", w)
	}
	// Opened again on the same node: the cached selection is used (it
	// differs from the index in the store, which lists every shard).
	again, err := stream.Open(ctx, &stream.Options{Remote: "mem://data/shard-{000002,000001}.tar", Local: subLocal, Registry: reg})
	if err != nil {
		t.Fatalf("second open of a subset: %v", err)
	}
	again.Close()
	if ds.Len() != 10 || ds.ShardInfo(0).RawData.Basename != "shard-000002.tar" {
		t.Fatalf("subset: %d samples, first shard %s", ds.Len(), ds.ShardInfo(0).RawData.Basename)
	}
	s, err := ds.Get(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if id := tarSampleID(t, s); id != 10 {
		t.Fatalf("sample 0 is %d, want 10", id)
	}
	// A directory holding an index of tars opens like an MDS dataset.
	dd, err := stream.Open(ctx, &stream.Options{Remote: "mem://data", Local: t.TempDir(), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	if dd.Len() != 20 {
		t.Fatalf("directory: %d samples", dd.Len())
	}

	// A key split across two shards.
	var a, b strings.Builder
	wa, wb := wds.NewWriter(&a), wds.NewWriter(&b)
	wa.Write("k1", map[string][]byte{"jpg": []byte("x")})
	wa.Write("k2", map[string][]byte{"jpg": []byte("x")})
	wb.Write("k2", map[string][]byte{"cls": []byte("1")})
	wa.Close()
	wb.Close()
	_, sb := memTars(t, map[string][]byte{"a.tar": []byte(a.String()), "b.tar": []byte(b.String())})
	_, err = stream.BuildTarIndex(ctx, sb, []string{"a.tar", "b.tar"}, nil)
	var ce *wds.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), "b.tar") || !strings.Contains(err.Error(), "a.tar") {
		t.Fatalf("split key: %v", err)
	}
}

// byteCountingBucket counts the bytes its ranged readers return.
type byteCountingBucket struct {
	storage.Bucket
	mu    sync.Mutex
	bytes int64
	reqs  int
}

func (b *byteCountingBucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := b.Bucket.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.reqs++
	b.mu.Unlock()
	return &countedBody{ReadCloser: rc, b: b}, nil
}

type countedBody struct {
	io.ReadCloser
	b *byteCountingBucket
}

func (c *countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.b.mu.Lock()
	c.b.bytes += int64(n)
	c.b.mu.Unlock()
	return n, err
}

// TestTarIndexSkipsLargeMembers: the header scan of shards with 3 MB
// members reads a small part of them through ranged requests, and gives
// the same index (digests included) as the in-place scan of the same files.
func TestTarIndexSkipsLargeMembers(t *testing.T) {
	ctx := context.Background()
	files := writeTars(t, 3, 4, 3<<20)
	_, mb := memTars(t, files)
	cb := &byteCountingBucket{Bucket: mb}
	keys := []string{"shard-000000.tar", "shard-000001.tar", "shard-000002.tar"}
	idx, err := stream.BuildTarIndex(ctx, cb, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, b := range files {
		total += int64(len(b))
	}
	if cb.bytes*20 > total {
		t.Errorf("index build read %d of %d bytes (%d requests): want under 5%%", cb.bytes, total, cb.reqs)
	}
	dir := t.TempDir()
	for k, b := range files {
		os.WriteFile(filepath.Join(dir, k), b, 0o644)
	}
	before, _ := os.ReadDir(dir)
	ds, err := stream.Open(ctx, &stream.Options{Local: filepath.Join(dir, "shard-{000000..000002}.tar")})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Errorf("reading in place wrote into the dataset directory: %d entries, was %d", len(after), len(before))
	}
	for i := range keys {
		got, want := ds.ShardInfo(i), idx.Shards[i]
		if got.Samples != want.Samples || got.RawData.Bytes != want.RawData.Bytes ||
			got.RawData.Hashes[wds.HeaderDigest] != want.RawData.Hashes[wds.HeaderDigest] {
			t.Errorf("shard %d: in place %+v, ranged %+v", i, got, want)
		}
	}
	s, err := ds.Get(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if tarSampleID(t, s) != 5 {
		t.Fatal("sample 5 is not s000005")
	}
	// A directory of tars without an index, read in place.
	dd, err := stream.Open(ctx, &stream.Options{Local: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	if dd.Len() != 12 {
		t.Fatalf("directory in place: %d samples", dd.Len())
	}
}

// TestTarMixedWithMDS mixes a tar stream and an MDS stream in one dataset:
// every sample of both once per epoch, each from its own format.
func TestTarMixedWithMDS(t *testing.T) {
	ctx := context.Background()
	tarReg, _ := memTars(t, writeTars(t, 4, 10, 100))
	mdsReg, _ := memDataset(t, spec{samples: 60, payload: 32, sizeLimit: 1 << 10})
	reg := &storage.Registry{}
	reg.Register("mem", func(ctx context.Context, u *url.URL) (storage.Bucket, error) {
		if u.Host == "mds" {
			return mdsReg.Open(ctx, "mem://data")
		}
		return tarReg.Open(ctx, u.String())
	})
	ds, err := stream.Open(ctx, &stream.Options{Streams: []stream.Stream{
		{Remote: "mem://data/shard-{000000..000003}.tar"}, {Remote: "mem://mds"},
	}, Local: t.TempDir(), Registry: reg, BatchSize: 4, Shuffle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Len() != 100 {
		t.Fatalf("%d samples, want 100", ds.Len())
	}
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	tars, mdss := map[int64]int{}, map[int64]int{}
	for it.Next() {
		s, err := it.Sample()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s[wds.KeyField]; ok {
			tars[tarSampleID(t, s)]++
		} else {
			mdss[sampleID(t, s)]++
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(tars) != 40 || len(mdss) != 60 {
		t.Fatalf("%d tar samples and %d MDS samples, want 40 and 60", len(tars), len(mdss))
	}
	for id, n := range tars {
		if n != 1 {
			t.Errorf("tar sample %d %d times", id, n)
		}
	}
	for id, n := range mdss {
		if n != 1 {
			t.Errorf("MDS sample %d %d times", id, n)
		}
	}
}

// TestTarIndexBuiltOnceAndCached: the first open without an index scans
// the shards' headers; the index is cached, so a second open on the node
// reads no shard at all.
func TestTarIndexBuiltOnceAndCached(t *testing.T) {
	ctx := context.Background()
	_, mb := memTars(t, writeTars(t, 3, 5, 100))
	cb := &byteCountingBucket{Bucket: mb}
	reg := &storage.Registry{}
	reg.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return nopBucket{cb}, nil })
	local := t.TempDir()
	for round := range 2 {
		before := cb.reqs
		ds, err := stream.Open(ctx, &stream.Options{Remote: "mem://data/shard-{000000..000002}.tar", Local: local, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		if ds.Len() != 15 {
			t.Fatalf("round %d: %d samples", round, ds.Len())
		}
		// The scan is said, with the way out; the cached index is not.
		w := ds.OpenWarnings()
		if round == 0 && (len(w) != 1 || !strings.Contains(w[0], "these 3 tar shards") || !strings.Contains(w[0], "sluice index 'mem://data/shard-{000000..000002}.tar'")) {
			t.Errorf("first open warned %q, want the 3 shards scanned and sluice index", w)
		}
		if round == 1 && len(w) != 0 {
			t.Errorf("second open warned %q", w)
		}
		ds.Close()
		if round == 0 && cb.reqs-before < 3 {
			t.Errorf("first open made %d ranged reads, want one per shard at least", cb.reqs-before)
		}
		if round == 1 && cb.reqs != before {
			t.Errorf("second open made %d ranged reads, want 0 (cached index)", cb.reqs-before)
		}
	}
	if _, err := os.Stat(filepath.Join(local, format.IndexFile)); err != nil {
		t.Errorf("built index not cached: %v", err)
	}
}
