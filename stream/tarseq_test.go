package stream_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/stream"
)

// seqRead reads every reader of a ranks × workers shape of one epoch
// concurrently and returns, per reader, the sample IDs in delivery order.
func seqRead(t *testing.T, ctx context.Context, open func() *stream.TarSequence, epoch int64, ranks, workers int) [][]int64 {
	t.Helper()
	out := make([][]int64, ranks*max(workers, 1))
	var wg sync.WaitGroup
	for r := range ranks {
		s := open() // one TarSequence per rank, as separate processes have
		for w := range max(workers, 1) {
			it, err := s.Iter(ctx, epoch, stream.TarSeqShape{Rank: r, Ranks: ranks, Worker: w, Workers: workers})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				defer it.Close()
				for it.Next() {
					s, err := it.Sample()
					if err != nil {
						t.Error(err)
						return
					}
					if u, _ := s[wds.URLField].(string); u != it.URL() || !strings.HasSuffix(u, ".tar") {
						t.Errorf("__url__ %v, iterator URL %q", s[wds.URLField], it.URL())
					}
					out[k] = append(out[k], tarSampleID(t, s))
				}
				if err := it.Err(); err != nil {
					t.Error(err)
				}
			}(r*max(workers, 1) + w)
		}
	}
	wg.Wait()
	return out
}

// checkSeqOnce checks that readers together delivered 0..n-1 once each,
// every reader whole shards of per samples in archive order.
func checkSeqOnce(t *testing.T, readers [][]int64, n, per int) {
	t.Helper()
	seen := make([]int, n)
	for k, ids := range readers {
		if len(ids)%per != 0 {
			t.Errorf("reader %d got %d samples, not whole shards of %d", k, len(ids), per)
		}
		for i, id := range ids {
			if id < 0 || id >= int64(n) {
				t.Fatalf("reader %d: sample %d out of range", k, id)
			}
			seen[id]++
			if i%per != 0 && id != ids[i-1]+1 {
				t.Errorf("reader %d: sample %d follows %d inside a shard (archive order broken)", k, id, ids[i-1])
			}
		}
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("sample %d delivered %d times", id, c)
		}
	}
}

// TestTarSeqExactlyOnceUnderLimit streams 24 tars in WebDataset order
// through a cache smaller than the data (two shards more than the
// readers), on 1, 2 and 4 ranks × 0 and 2
// workers, two epochs with shard shuffling: every sample once per epoch,
// each reader whole shards, the epochs in different orders, and the same
// order when read again.
func TestTarSeqExactlyOnceUnderLimit(t *testing.T) {
	const shards, per, payload = 24, 10, 1000
	files := writeTars(t, shards, per, payload)
	var shardBytes, total int64
	for _, b := range files {
		shardBytes = max(shardBytes, int64(len(b)))
		total += int64(len(b))
	}
	reg, _ := memTars(t, files)
	ctx := context.Background()
	seed := int64(7)
	for _, ranks := range []int{1, 2, 4} {
		for _, workers := range []int{0, 2} {
			t.Run(fmt.Sprintf("ranks%d-workers%d", ranks, workers), func(t *testing.T) {
				readers := ranks * max(workers, 1)
				limit := int64(readers+2) * shardBytes
				if limit >= total {
					t.Fatalf("limit %d not under the data size %d", limit, total)
				}
				c, err := cache.Open(ctx, t.TempDir(), &cache.Options{Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				open := func() *stream.TarSequence {
					s, err := stream.OpenTarSequence(ctx, &stream.Options{Remote: "mem://data/shard-{000000..000023}.tar",
						Registry: reg, Cache: c, Shuffle: true, ShuffleSeed: &seed})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { s.Close() })
					return s
				}
				var epochs [][]int64
				for epoch := range int64(2) {
					rs := seqRead(t, ctx, open, epoch, ranks, workers)
					checkSeqOnce(t, rs, shards*per, per)
					epochs = append(epochs, slices.Concat(rs...))
				}
				if slices.Equal(epochs[0], epochs[1]) {
					t.Error("epochs 0 and 1 came in the same order with shardshuffle")
				}
				if again := slices.Concat(seqRead(t, ctx, open, 1, ranks, workers)...); !slices.Equal(again, epochs[1]) {
					t.Error("epoch 1 read again came in another order")
				}
				if u, err := c.Usage(ctx); err != nil || u > limit {
					t.Errorf("cache usage %d (err %v) over the limit %d", u, err, limit)
				}
			})
		}
	}
}

// TestTarSeqUneven: 10 shards on 4 ranks, and 3 shards on 2 ranks × 2
// workers: every sample still once, readers get whole shards, and the
// split is WebDataset's (shard i to rank i mod ranks, then to worker
// (i / ranks) mod workers), so some readers get more samples, or none.
func TestTarSeqUneven(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		shards, ranks, workers int
		want                   []int // shards per reader
	}{
		{10, 4, 0, []int{3, 3, 2, 2}},
		{3, 2, 2, []int{1, 1, 1, 0}},
	} {
		t.Run(fmt.Sprintf("%d-shards-%dx%d", tc.shards, tc.ranks, tc.workers), func(t *testing.T) {
			const per = 5
			reg, _ := memTars(t, writeTars(t, tc.shards, per, 100))
			spec := fmt.Sprintf("mem://data/shard-{000000..%06d}.tar", tc.shards-1)
			open := func() *stream.TarSequence {
				s, err := stream.OpenTarSequence(ctx, &stream.Options{Remote: spec, Registry: reg, Local: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			rs := seqRead(t, ctx, open, 0, tc.ranks, tc.workers)
			checkSeqOnce(t, rs, tc.shards*per, per)
			for k, ids := range rs {
				if len(ids) != tc.want[k]*per {
					t.Errorf("reader %d: %d samples, want %d shards of %d", k, len(ids), tc.want[k], per)
				}
			}
			// Without shuffling, reader 0 reads shards 0, ranks×workers, …
			if len(rs[0]) == 0 || rs[0][0] != 0 {
				t.Errorf("reader 0 starts at sample %v, want 0", rs[0])
			}
		})
	}
}

// TestTarSeqResume stops a reader in the middle of a shard and resumes it
// from its state in a new TarSequence: exactly the rest, in order; on
// another shape the state is refused.
func TestTarSeqResume(t *testing.T) {
	ctx := context.Background()
	const shards, per = 8, 10
	reg, _ := memTars(t, writeTars(t, shards, per, 100))
	open := func() *stream.TarSequence {
		s, err := stream.OpenTarSequence(ctx, &stream.Options{Remote: "mem://data/shard-{000000..000007}.tar",
			Registry: reg, Local: t.TempDir(), Shuffle: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	shape := stream.TarSeqShape{Rank: 1, Ranks: 2, Worker: 0, Workers: 2}
	full := func() []int64 {
		it, err := open().Iter(ctx, 3, shape)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var ids []int64
		for it.Next() {
			s, _ := it.Sample()
			ids = append(ids, tarSampleID(t, s))
		}
		return ids
	}()
	if len(full) != 2*per {
		t.Fatalf("reader has %d samples, want %d", len(full), 2*per)
	}
	for _, stop := range []int{0, 3, per, per + 7, 2 * per} {
		it, err := open().Iter(ctx, 3, shape)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for len(got) < stop && it.Next() {
			s, _ := it.Sample()
			got = append(got, tarSampleID(t, s))
		}
		st := it.State()
		it.Close()
		if _, err := open().Resume(ctx, st, stream.TarSeqShape{Rank: 1, Ranks: 2, Workers: 1}); !errors.Is(err, stream.ErrTarSeqShape) {
			t.Errorf("stop %d: resume on another shape: %v, want ErrTarSeqShape", stop, err)
		}
		rit, err := open().Resume(ctx, st, shape)
		if err != nil {
			t.Fatal(err)
		}
		for rit.Next() {
			s, _ := rit.Sample()
			got = append(got, tarSampleID(t, s))
		}
		if err := rit.Err(); err != nil {
			t.Fatal(err)
		}
		rit.Close()
		if !slices.Equal(got, full) {
			t.Errorf("stop %d (state %+v): got %v, want %v", stop, st, got, full)
		}
	}
}

// TestTarSeqFixturesInPlace reads the reference fixtures in place in one
// process without shuffling: webdataset's own order, keys and bytes, and
// __url__ the shard path as given.
func TestTarSeqFixturesInPlace(t *testing.T) {
	root := wdsFixtures(t)
	for _, name := range []string{"images", "mixed", "gnutar_pax"} {
		t.Run(name, func(t *testing.T) {
			want := readExpected(t, filepath.Join(root, name, "expected.jsonl"))
			n := len(mustGlob(t, filepath.Join(root, name, "data", "*.tar")))
			spec := filepath.Join(root, name, "data", fmt.Sprintf("shard-{000000..%06d}.tar", n-1))
			s, err := stream.OpenTarSequence(context.Background(), &stream.Options{Remote: spec})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			it, err := s.Iter(context.Background(), 0, stream.TarSeqShape{})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			i := 0
			for ; it.Next(); i++ {
				smp, err := it.Sample()
				if err != nil {
					t.Fatal(err)
				}
				if i >= len(want) {
					continue
				}
				w := want[i]
				if smp[wds.KeyField] != w.Key {
					t.Errorf("sample %d: key %v, want %q", i, smp[wds.KeyField], w.Key)
				}
				if u := filepath.Join(root, name, "data", w.URL); smp[wds.URLField] != u {
					t.Errorf("sample %d: __url__ %v, want %q", i, smp[wds.URLField], u)
				}
				if len(smp) != len(w.Fields)+2 {
					t.Errorf("sample %d: %d fields, want %d", i, len(smp)-2, len(w.Fields))
				}
				for f, wf := range w.Fields {
					if v, _ := smp[f].([]byte); len(v) != wf.RawLen {
						t.Errorf("sample %d field %s: %d bytes, want %d", i, f, len(v), wf.RawLen)
					}
				}
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			if i != len(want) {
				t.Errorf("%d samples, want %d", i, len(want))
			}
		})
	}
}

func mustGlob(t *testing.T, pat string) []string {
	t.Helper()
	m, err := filepath.Glob(pat)
	if err != nil || len(m) == 0 {
		t.Fatalf("glob %s: %v %v", pat, m, err)
	}
	return m
}

// TestTarSeqBadShard: a corrupt shard stops its reader with an error
// naming the shard's URL and the member offset, and a missing one fails
// the open naming it.
func TestTarSeqBadShard(t *testing.T) {
	ctx := context.Background()
	files := writeTars(t, 2, 3, 100)
	files["shard-000001.tar"] = files["shard-000001.tar"][:1600] // cut inside the first sample's jpg data
	reg, _ := memTars(t, files)
	s, err := stream.OpenTarSequence(ctx, &stream.Options{Remote: "mem://data/shard-{000000..000001}.tar", Registry: reg, Local: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	it, err := s.Iter(ctx, 0, stream.TarSeqShape{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.Next() {
		n++
	}
	it.Close()
	if n != 3 || !errors.Is(it.Err(), wds.ErrCorrupt) || !strings.Contains(it.Err().Error(), "mem://data/shard-000001.tar") {
		t.Errorf("%d samples, err %v; want 3 and a corrupt error naming shard-000001.tar", n, it.Err())
	}
	_, err = stream.OpenTarSequence(ctx, &stream.Options{Remote: "mem://data/shard-{000000..000002}.tar", Registry: reg, Local: t.TempDir()})
	if !errors.Is(err, storage.ErrNotExist) || !strings.Contains(err.Error(), "shard-000002.tar") {
		t.Errorf("missing shard: %v", err)
	}
}

// TestTarSeqFromS3 streams tars from the real S3 server (.ci/services.sh)
// with a cache limit smaller than the data on 2 ranks × 2 workers, and
// checks every sample once per epoch.
func TestTarSeqFromS3(t *testing.T) {
	srv := s3test.Require(t)
	srv.SetCredentialEnv(t)
	endpoint, bucket, region := srv.Endpoint, srv.Bucket, srv.Region
	prefix := s3test.NewPrefix("tarseq")
	ctx := context.Background()
	direct := srv.Open(t, prefix)
	const shards, per = 8, 20
	files := writeTars(t, shards, per, 2000)
	var shardBytes, total int64
	for k, b := range files {
		w, err := direct.NewWriter(ctx, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		shardBytes = max(shardBytes, int64(len(b)))
		total += int64(len(b))
	}
	q := url.Values{"endpoint": {endpoint}, "region": {region}}
	limit := 5 * shardBytes
	if limit >= total {
		t.Fatalf("limit %d not under the data size %d", limit, total)
	}
	c, err := cache.Open(ctx, t.TempDir(), &cache.Options{Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, remote := range []string{
		"s3://" + bucket + "/" + prefix + "/shard-{000000..000007}.tar?" + q.Encode(),
		"s3://" + bucket + "/" + prefix + "?" + q.Encode(), // the prefix: every .tar under it
	} {
		open := func() *stream.TarSequence {
			s, err := stream.OpenTarSequence(ctx, &stream.Options{Remote: remote, Registry: stores.Default(), Cache: c, Shuffle: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		for epoch := range int64(2) {
			checkSeqOnce(t, seqRead(t, ctx, open, epoch, 2, 2), shards*per, per)
		}
		if u, err := c.Usage(ctx); err != nil || u > limit {
			t.Errorf("cache usage %d (err %v) over the limit %d", u, err, limit)
		}
	}
	if cs := c.Stats(); cs.Evictions == 0 {
		t.Errorf("no evictions under a limit of %d for %d bytes: %+v", limit, total, cs)
	}
	// __url__ is the shard's URL without the store options.
	s := func() *stream.TarSequence {
		s, err := stream.OpenTarSequence(ctx, &stream.Options{Remote: "s3://" + bucket + "/" + prefix + "/shard-{000000..000007}.tar?" + q.Encode(),
			Registry: stores.Default(), Cache: c})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	defer s.Close()
	if u, want := s.ShardURL(3), "s3://"+bucket+"/"+prefix+"/shard-000003.tar"; u != want {
		t.Errorf("ShardURL(3) = %q, want %q", u, want)
	}
}
