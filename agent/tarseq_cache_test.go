package agent

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format/wds"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
)

// nopClose keeps the shared memstore open when a store handle closes.
type nopClose struct{ storage.Bucket }

func (nopClose) Close() error { return nil }

// TestTarSeqThroughCache streams remote tars through the agent's cache
// under a limit smaller than the data: every sample once per epoch with
// two workers, the shards downloaded into the cache and evicted.
func TestTarSeqThroughCache(t *testing.T) {
	const shards, per = 10, 6
	mb := memstore.New("data")
	var shardBytes, total int64
	for k := range shards {
		var buf bytes.Buffer
		w := wds.NewWriter(&buf)
		for j := range per {
			id := k*per + j
			if err := w.Write(fmt.Sprintf("s%06d", id), map[string][]byte{"bin": bytes.Repeat([]byte{byte(id)}, 2000)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		ow, err := mb.NewWriter(context.Background(), fmt.Sprintf("shard-%06d.tar", k), nil)
		if err != nil {
			t.Fatal(err)
		}
		ow.Write(buf.Bytes())
		if err := ow.Close(); err != nil {
			t.Fatal(err)
		}
		shardBytes = max(shardBytes, int64(buf.Len()))
		total += int64(buf.Len())
	}
	reg := &storage.Registry{}
	reg.Register("mem", func(context.Context, *url.URL) (storage.Bucket, error) { return nopClose{mb}, nil })
	a, err := New(&Options{Registry: reg, IdleTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, a)()
	ctx := context.Background()
	dir := t.TempDir()
	limit := 5 * shardBytes
	if limit >= total {
		t.Fatalf("limit %d not under the data %d", limit, total)
	}
	o, err := c.TarSeqOpen(ctx, agentapi.TarSeqOpen{Job: "j", Remote: "mem://data/shard-{000000..000009}.tar",
		Local: filepath.Join(dir, "cache"), CacheLimit: fmt.Sprint(limit), Shuffle: true})
	if err != nil {
		t.Fatal(err)
	}
	if o.ShardURLs[0] != "mem://data/shard-000000.tar" {
		t.Fatalf("shard URL %q", o.ShardURLs[0])
	}
	for epoch := range 2 {
		// The two workers read in turn, a few samples at a time, as a
		// DataLoader takes their batches.
		rs := []tarSeqReaderT{
			beginSeq(t, c, o.Handle, agentapi.TarSeqBegin{Worker: 0, Workers: 2}),
			beginSeq(t, c, o.Handle, agentapi.TarSeqBegin{Worker: 1, Workers: 2}),
		}
		var got []string
		live := []bool{true, true}
		for live[0] || live[1] {
			for w, r := range rs {
				if !live[w] {
					continue
				}
				b, recs, err := c.TarSeqNext(ctx, agentapi.TarSeqNext{Iter: r.iter, Max: 4})
				if err != nil {
					t.Fatal(err)
				}
				for _, rec := range recs {
					got = append(got, recordKey(t, rec))
				}
				live[w] = !b.Done
			}
		}
		for _, r := range rs {
			c.TarSeqEnd(ctx, r.iter)
		}
		slices.Sort(got)
		if len(got) != shards*per {
			t.Fatalf("epoch %d: %d samples, want %d", epoch, len(got), shards*per)
		}
		for i, k := range got {
			if want := fmt.Sprintf("s%06d", i); k != want {
				t.Fatalf("epoch %d: sample %d is %s, want %s", epoch, i, k, want)
			}
		}
	}
	a.cacheMu.Lock()
	cc := a.caches[filepath.Join(dir, "cache")]
	a.cacheMu.Unlock()
	if cc == nil {
		t.Fatal("the agent opened no cache for the tar sequence's directory")
	}
	st := cc.Stats()
	if st.Downloads < 2*shards-5 || st.Evictions == 0 {
		t.Fatalf("cache: %d downloads, %d evictions; want the shards fetched each epoch under the limit", st.Downloads, st.Evictions)
	}
}
