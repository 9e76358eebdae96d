package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluicedata/sluice/internal/atomicfile"
	"github.com/sluicedata/sluice/storage/retry"
	"github.com/sluicedata/sluice/stream"
)

// noIndexHelp documents `sluice stream --no-index`.
const noIndexHelp = `tar datasets: stream in WebDataset's own sequential way, without an index
(shards split by rank then by worker, whole and in archive order; --shuffle
shuffles the shard list each epoch with --shuffle-seed); --resume/--save-state
hold one state per worker and resume only on the same ranks × workers`

// tarSeqStateFile is what --save-state writes with --no-index: one state
// per DataLoader worker of the rank.
type tarSeqStateFile struct {
	Format  string               `json:"format"` // "sluice-tar-sequence"
	Workers []stream.TarSeqState `json:"workers"`
}

const tarSeqStateFormat = "sluice-tar-sequence"

// tarSeqReport is what `sluice stream --no-index --json` prints.
type tarSeqReport struct {
	Rank         int             `json:"rank"`
	WorldSize    int             `json:"world_size"`
	Epoch        int64           `json:"epoch"`
	Shards       int             `json:"shards"`
	Samples      int64           `json:"samples"`
	Bytes        int64           `json:"bytes"`
	ElapsedS     float64         `json:"elapsed_s"`
	SamplesPerS  float64         `json:"samples_per_s"`
	MBPerS       float64         `json:"mb_per_s"`
	Downloads    int64           `json:"downloads"`
	BytesFetched int64           `json:"bytes_fetched"`
	Evictions    int64           `json:"evictions"`
	State        json.RawMessage `json:"state"`
}

// runTarSequence is `sluice stream --no-index`: the rank's DataLoader
// workers read round-robin, a batch at a time, as a torch DataLoader
// takes batches from its workers.
func runTarSequence(ctx context.Context, e *env, f *streamFlags, url string) error {
	var retries retry.Counts
	seed := f.shuffleSeed
	opts := &stream.Options{Remote: url, Local: f.local, Registry: e.registry, Shuffle: f.shuffle, ShuffleSeed: &seed,
		DownloadRetry: f.downloadRetry, DownloadTimeout: f.downloadTimeout, CacheSharedGroup: f.cacheGroup,
		Retry: retries.Hook(&retry.Options{MaxAttempts: f.retryAttempts, InitialBackoff: f.retryBackoff,
			MaxBackoff: f.retryMaxBackoff, ThrottleBackoff: f.throttleBackoff, StallTimeout: f.stallTimeout})}
	if f.local == "" && strings.Contains(url, "://") && !strings.HasPrefix(url, "file://") {
		return errors.New("stream: --local is required for a remote URL")
	}
	if f.cacheLimit != "" {
		n, err := stream.ParseBytes(f.cacheLimit)
		if err != nil {
			return fmt.Errorf("stream: --cache-limit: %w", err)
		}
		opts.CacheLimit = n
	}
	w, err := streamWorld(f)
	if err != nil {
		return err
	}
	workers := max(f.workers, 1)
	shape := func(k int) stream.TarSeqShape {
		return stream.TarSeqShape{Rank: w.Rank, Ranks: w.NumRanks(), Worker: k, Workers: workers}
	}
	seq, err := stream.OpenTarSequence(ctx, opts)
	if err != nil {
		return err
	}
	defer seq.Close()
	its := make([]*stream.TarSeqIterator, workers)
	defer func() {
		for _, it := range its {
			if it != nil {
				it.Close()
			}
		}
	}()
	var epoch int64
	if f.resume != "" {
		b, err := os.ReadFile(f.resume)
		if err != nil {
			return fmt.Errorf("stream: --resume: %w", err)
		}
		var sf tarSeqStateFile
		if err := json.Unmarshal(b, &sf); err != nil || sf.Format != tarSeqStateFormat {
			return fmt.Errorf("stream: --resume %s: not a --no-index state (format %q, %v)", f.resume, sf.Format, err)
		}
		if len(sf.Workers) != workers {
			return fmt.Errorf("stream: --resume %s: %w: it has %d workers, this run %d", f.resume, stream.ErrTarSeqShape, len(sf.Workers), workers)
		}
		for k := range its {
			if its[k], err = seq.Resume(ctx, sf.Workers[k], shape(k)); err != nil {
				return fmt.Errorf("stream: --resume %s: %w", f.resume, err)
			}
		}
		epoch = sf.Workers[0].Epoch
	} else {
		for k := range its {
			if its[k], err = seq.Iter(ctx, 0, shape(k)); err != nil {
				return err
			}
		}
	}
	state := func() []byte {
		sf := tarSeqStateFile{Format: tarSeqStateFormat}
		for _, it := range its {
			sf.Workers = append(sf.Workers, it.State())
		}
		b, _ := json.Marshal(sf)
		return b
	}
	var n, bytes int64
	saved := int64(-1)
	save := func() error {
		if f.saveState == "" || n == saved {
			return nil
		}
		if err := atomicfile.WriteFile(f.saveState, 0o600, state()); err != nil {
			return fmt.Errorf("stream: --save-state: %w", err)
		}
		saved = n
		return nil
	}
	defer func() {
		if err := save(); err != nil {
			fmt.Fprintf(e.stderr, "sluice stream: %v\n", err)
		}
	}()
	batch := max(f.batchSize, 1)
	start := time.Now()
	live := workers
	done := make([]bool, workers)
	for k := 0; live > 0 && (f.limit <= 0 || n < f.limit); k = (k + 1) % workers {
		if done[k] {
			continue
		}
		it := its[k]
		for b := 0; b < batch && (f.limit <= 0 || n < f.limit); b++ {
			if !it.Next() {
				if err := it.Err(); err != nil {
					return err
				}
				done[k] = true
				live--
				break
			}
			if f.decode {
				if _, err := it.Sample(); err != nil {
					return err
				}
			}
			n++
			bytes += int64(len(it.Record()))
			if f.saveEvery > 0 && n%f.saveEvery == 0 {
				if err := save(); err != nil {
					return err
				}
			}
		}
		if f.stepTime > 0 {
			if err := streamSleep(ctx, f.stepTime); err != nil {
				return err
			}
		}
	}
	elapsed := time.Since(start)
	if err := save(); err != nil {
		return err
	}
	shards := 0
	for k := range its {
		list, _ := seq.Shards(epoch, shape(k))
		shards += len(list)
	}
	r := tarSeqReport{Rank: w.Rank, WorldSize: w.NumRanks(), Epoch: epoch, Shards: shards, Samples: n, Bytes: bytes,
		ElapsedS: elapsed.Seconds(), State: state()}
	if s := elapsed.Seconds(); s > 0 {
		r.SamplesPerS, r.MBPerS = float64(n)/s, float64(bytes)/s/1e6
	}
	if c := seq.Cache(); c != nil {
		cs := c.Stats()
		r.Downloads, r.BytesFetched, r.Evictions = cs.Downloads, cs.BytesFetched, cs.Evictions
	}
	if f.asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(e.stdout, "rank %d of %d, epoch %d, WebDataset order without an index: %d shards for %d workers\n",
		r.Rank, r.WorldSize, r.Epoch, r.Shards, workers)
	fmt.Fprintf(e.stdout, "streamed %d samples (%.1f MB) in %.3fs: %.0f samples/s, %.1f MB/s\n",
		r.Samples, float64(r.Bytes)/1e6, r.ElapsedS, r.SamplesPerS, r.MBPerS)
	fmt.Fprintf(e.stdout, "cache: %d downloads (%.1f MB fetched), %d evictions\n", r.Downloads, float64(r.BytesFetched)/1e6, r.Evictions)
	fmt.Fprintf(e.stdout, "state: %s\n", r.State)
	return nil
}
