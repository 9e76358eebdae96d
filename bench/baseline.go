package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

// exportFiles writes every sample's record as a file under dir (one file
// per sample, as an image folder holds them) from the warm cache, and
// returns the paths in sample order. The files are written under a
// temporary directory renamed to dir once complete, so an interrupted
// export leaves no partial folder (a leftover temporary one is removed).
func (c *Config) exportFiles(ctx context.Context, cacheDir, dir string) ([]string, error) {
	o := c.Options
	o.Local, o.Shuffle = cacheDir, false
	ds, err := stream.Open(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		return nil, err
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	_, statErr := os.Stat(dir)
	have := statErr == nil
	tmp := dir + ".tmp"
	if !have {
		if err := os.RemoveAll(tmp); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	var paths []string
	for it.Next() {
		name := fmt.Sprintf("%09d.bin", it.ID())
		if !have {
			if err := os.WriteFile(filepath.Join(tmp, name), it.Record(), 0o644); err != nil {
				return nil, fmt.Errorf("bench: export: %w", err)
			}
		}
		paths = append(paths, filepath.Join(dir, name))
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	if !have {
		if err := os.Rename(tmp, dir); err != nil {
			return nil, fmt.Errorf("bench: export: %w", err)
		}
	}
	return paths, nil
}

// baselineRun reads the exported files with a plain loader: Workers
// goroutines read whole files ahead of the loop in a shuffled (seeded) or
// sorted order, as a PyTorch DataLoader over an image folder does.
func (c *Config) baselineRun(ctx context.Context, cacheDir string, _ time.Time) (Summary, []Step, error) {
	paths, err := c.exportFiles(ctx, cacheDir, filepath.Join(c.Out, "files"))
	if err != nil {
		return Summary{}, nil, err
	}
	if c.Options.Shuffle {
		seed := uint64(plan.DefaultShuffleSeed)
		if c.Options.ShuffleSeed != nil {
			seed = uint64(*c.Options.ShuffleSeed)
		}
		r := rand.New(rand.NewPCG(seed, 1))
		r.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
	}
	workers := max(c.Workers, 1)
	batch := c.Options.BatchSize
	ctx, cancel := context.WithCancel(ctx)
	type item struct {
		n   int
		err error
	}
	// Worker w loads batches w, w+W, ...; the loop takes them in order.
	nb := (len(paths) + batch - 1) / batch
	slots := make([]chan item, nb)
	for i := range slots {
		slots[i] = make(chan item, 1)
	}
	// Each worker keeps at most two batches ready (DataLoader's
	// prefetch_factor 2).
	sems := make([]chan struct{}, workers)
	for i := range sems {
		sems[i] = make(chan struct{}, 2)
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := w; b < nb; b += workers {
				select {
				case sems[w] <- struct{}{}:
				case <-ctx.Done():
					return
				}
				it := item{}
				for _, p := range paths[b*batch : min((b+1)*batch, len(paths))] {
					data, err := os.ReadFile(p)
					if err != nil {
						it.err = fmt.Errorf("bench: baseline: %w", err)
						break
					}
					_ = data
					it.n++
				}
				slots[b] <- it
			}
		}()
	}
	defer func() {
		cancel() // stops the workers when the loop ends early
		wg.Wait()
	}()
	b := 0
	return c.loop(ctx, "baseline", func() (int, error) {
		if b == nb {
			return 0, nil
		}
		select {
		case it := <-slots[b]:
			<-sems[b%workers]
			b++
			return it.n, it.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
}
