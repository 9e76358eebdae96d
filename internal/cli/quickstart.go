package cli

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedata/sluice/cache"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/internal/atomicfile"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
	"github.com/sluicedata/sluice/stream"
)

type quickstartFlags struct {
	dir  string
	size string
	keep bool
}

func newQuickstartCommand(e *env) *cobra.Command {
	var f quickstartFlags
	cmd := &cobra.Command{
		Use:   "quickstart",
		Short: "Make a synthetic dataset, stream it, stop, resume and check",
		Long: `Run Sluice's main job end to end on this machine, with no account and no
network:

 1. write a synthetic multimodal dataset (JPEG images, captions, feature
    vectors, variable-length audio) as zstd-compressed MDS shards into a local
    store that plays the remote;
 2. stream epoch 0 as 4 ranks on 2 nodes would, each node through its own
    cache whose limit is smaller than the dataset, and stop part-way;
 3. save the state and resume it on 3 ranks on one node;
 4. check that every sample came exactly once, and print the figures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runQuickstart(cmd.Context(), e, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "working directory (default: a new temporary directory, removed afterwards)")
	fl.StringVar(&f.size, "size", "256mb", `approximate dataset size ("1gb"; small sizes run faster)`)
	fl.BoolVar(&f.keep, "keep", false, "keep the working directory")
	return cmd
}

// qsBatch is the per-device batch size of both runs.
const qsBatch = 8

// qsUnit makes every shape of the demo free of padding: sample counts are
// multiples of it (4 ranks × 8 and 3 ranks × 8 divide it).
const qsUnit = 96

func runQuickstart(ctx context.Context, e *env, f *quickstartFlags) (err error) {
	size, err := stream.ParseBytes(f.size)
	if err != nil {
		return fmt.Errorf("quickstart: --size: %w", err)
	}
	dir := f.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "sluice-quickstart-"); err != nil {
			return err
		}
		if !f.keep {
			defer os.RemoveAll(dir)
		}
	}
	out := e.stdout
	fmt.Fprintln(out, "Sluice quickstart: a synthetic multimodal dataset streamed through a cache smaller than it,")
	fmt.Fprintln(out, "stopped part-way and resumed on another world size.")
	fmt.Fprintln(out)

	// 1. The dataset.
	remote := filepath.Join(dir, "remote")
	start := time.Now()
	n, info, err := qsWrite(remote, size)
	if err != nil {
		return err
	}
	var raw, stored int64
	for _, s := range info {
		raw += s.RawData.Bytes
		stored += s.ZipData.Bytes
	}
	fmt.Fprintf(out, "1. wrote %d samples (JPEG image, caption, feature vector, audio clip each) in %d zstd shards:\n", n, len(info))
	fmt.Fprintf(out, "   %.1f MB raw, %.1f MB stored, in %.2fs, to the local store %s\n\n",
		float64(raw)/1e6, float64(stored)/1e6, time.Since(start).Seconds(), remote)

	reg := &storage.Registry{}
	reg.Register("file", filestore.Open)
	url := "file://" + remote
	var maxFoot int64
	for _, s := range info {
		maxFoot = max(maxFoot, s.RawData.Bytes+s.ZipData.Bytes)
	}
	// Each node's cache holds about a third of the dataset, and at least
	// what 3 readers need (a leased shard each plus one being fetched).
	limit := max(raw/3, 6*maxFoot)
	if limit >= raw {
		return fmt.Errorf("quickstart: --size %s is too small to show a cache smaller than the dataset", f.size)
	}

	// 2. Epoch 0 on 2 nodes × 2 ranks, stopped at about 40%.
	stop := int64(n) * 2 / 5 / qsUnit * qsUnit
	seen := make([]int32, n)
	// py1e shuffles within blocks; blocks of a few shards keep each
	// node's working set within its cache (a block as large as the
	// dataset would make every node read every shard in random order).
	opts := stream.Options{Remote: url, Registry: reg, BatchSize: qsBatch, Shuffle: true,
		ShuffleBlockSize: int64(n / len(info) * 4)}
	phase1 := qsPhase{name: "epoch 0 on 4 ranks (2 nodes × 2 ranks)", nodes: 2, ranksPerNode: 2,
		perRank: stop / 4, limit: limit, dir: filepath.Join(dir, "cache"), opts: opts, seen: seen}
	fmt.Fprintf(out, "2. %s, cache limit %s per node, stop after %d of %d samples:\n",
		phase1.name, cache.FormatBytes(limit), stop, n)
	state, err := phase1.run(ctx, out, nil)
	if err != nil {
		return err
	}
	stateJSON, _ := state.MarshalJSON()
	statePath := filepath.Join(dir, "state.json")
	if err := atomicfile.WriteFile(statePath, 0o644, stateJSON); err != nil {
		return err
	}
	fmt.Fprintf(out, "   state saved to %s: %s\n\n", statePath, stateJSON)

	// 3. Resume on one node × 3 ranks, reusing node 0's cache directory.
	phase2 := qsPhase{name: "resumed on 3 ranks (1 node × 3 ranks)", nodes: 1, ranksPerNode: 3,
		perRank: -1, limit: limit, dir: filepath.Join(dir, "cache"), opts: opts, seen: seen}
	fmt.Fprintf(out, "3. %s from that state, reusing node 0's cache:\n", phase2.name)
	if _, err := phase2.run(ctx, out, &state); err != nil {
		return err
	}
	fmt.Fprintln(out)

	// 4. Exactly once.
	var missing, repeated int
	for _, c := range seen {
		switch {
		case c == 0:
			missing++
		case c > 1:
			repeated++
		}
	}
	if missing > 0 || repeated > 0 {
		return fmt.Errorf("quickstart: %d samples never came and %d came more than once", missing, repeated)
	}
	fmt.Fprintf(out, "4. check: every one of the %d samples came exactly once (%d before the stop, %d after),\n",
		n, phase1.samples, phase2.samples)
	fmt.Fprintln(out, "   each decoded with its id column equal to its sample ID; no cache ever exceeded its limit.")
	fmt.Fprintln(out)
	fmt.Fprint(out, quickstartHint(dir, f.keep || f.dir != "", (limit+1<<20-1)>>20))
	return nil
}

// qsPhase is one run of the demo: every rank of every node as a goroutine,
// each node with its own cache shared by its ranks.
type qsPhase struct {
	name                string
	nodes, ranksPerNode int
	perRank             int64 // samples each rank reads; -1: to the end
	limit               int64
	dir                 string
	opts                stream.Options
	seen                []int32

	mu      sync.Mutex
	samples int64
}

func (p *qsPhase) run(ctx context.Context, out io.Writer, resume *plan.State) (plan.State, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var state plan.State
	var firstErr error
	var wg sync.WaitGroup
	fail := func(err error) {
		p.mu.Lock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
		p.mu.Unlock()
	}
	type nodeFig struct {
		stats      stream.Stats
		peak       int64
		cacheStats cache.Stats
		elapsed    time.Duration
	}
	figs := make([]nodeFig, p.nodes)
	for node := range p.nodes {
		c, err := cache.Open(ctx, fmt.Sprintf("%s/node%d", p.dir, node), &cache.Options{Limit: p.limit})
		if err != nil {
			return state, err
		}
		defer c.Close()
		var peakMu sync.Mutex
		var nodeWG sync.WaitGroup
		start := time.Now()
		var total stream.Stats
		for r := range p.ranksPerNode {
			rank := node*p.ranksPerNode + r
			opts := p.opts
			opts.Cache = c
			ds, err := stream.Open(ctx, &opts)
			if err != nil {
				return state, err
			}
			defer ds.Close()
			if resume != nil {
				if err := ds.Load(*resume); err != nil {
					return state, err
				}
			}
			w := plan.World{Nodes: p.nodes, RanksPerNode: p.ranksPerNode, Rank: rank}
			ep, err := ds.NewEpoch(ctx, w, 1)
			if err != nil {
				return state, err
			}
			it, err := ep.RankIter(ctx)
			if err != nil {
				return state, err
			}
			nodeWG.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nodeWG.Done()
				defer it.Close()
				for (p.perRank < 0 || it.Yielded() < p.perRank) && it.Next() {
					s, err := it.Sample()
					if err != nil {
						fail(err)
						return
					}
					if id, ok := s["id"].(int64); !ok || id != it.ID() {
						fail(fmt.Errorf("quickstart: sample %d decoded with id %v", it.ID(), s["id"]))
						return
					}
					p.mu.Lock()
					p.seen[it.ID()]++
					p.samples++
					p.mu.Unlock()
					if it.Yielded()%qsBatch == 0 {
						u, err := c.Usage(ctx)
						if err == nil {
							peakMu.Lock()
							figs[node].peak = max(figs[node].peak, u)
							peakMu.Unlock()
						}
					}
				}
				if err := it.Err(); err != nil {
					fail(err)
					return
				}
				st := it.Stats()
				p.mu.Lock()
				total.Samples += st.Samples
				total.Bytes += st.Bytes
				total.Hits += st.Hits
				total.Misses += st.Misses
				total.Wait += st.Wait
				if total.FirstSample == 0 || st.FirstSample < total.FirstSample {
					total.FirstSample = st.FirstSample
				}
				if rank == 0 {
					if s, err := ds.State(it.Yielded()); err == nil {
						state = s
					}
				}
				p.mu.Unlock()
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodeWG.Wait()
			p.mu.Lock()
			figs[node] = nodeFig{stats: total, peak: figs[node].peak, cacheStats: c.Stats(), elapsed: time.Since(start)}
			p.mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return state, firstErr
	}
	for node, fg := range figs {
		s, cs := fg.stats, fg.cacheStats
		secs := fg.elapsed.Seconds()
		if fg.peak > p.limit {
			return state, fmt.Errorf("quickstart: node %d's cache held %d bytes, over its %d-byte limit", node, fg.peak, p.limit)
		}
		fmt.Fprintf(out, "   node %d: %d samples, %.1f MB in %.2fs: %.0f samples/s, %.1f MB/s decoded; first sample after %.1f ms\n",
			node, s.Samples, float64(s.Bytes)/1e6, secs, float64(s.Samples)/math.Max(secs, 1e-9),
			float64(s.Bytes)/1e6/math.Max(secs, 1e-9), s.FirstSample.Seconds()*1e3)
		fmt.Fprintf(out, "           cache: %d hits, %d misses, %d downloads (%.1f MB), %d evictions; peak %s of %s limit; waited %.2fs\n",
			s.Hits, s.Misses, cs.Downloads, float64(cs.BytesFetched)/1e6, cs.Evictions,
			cache.FormatBytes(fg.peak), cache.FormatBytes(p.limit), s.Wait.Seconds())
	}
	return state, nil
}

// qsWrite writes the synthetic dataset and returns its sample count and
// shard entries.
func qsWrite(dir string, size int64) (int, []format.ShardInfo, error) {
	const perSample = 8 << 10 // average encoded sample, roughly
	n := int(size / perSample / qsUnit * qsUnit)
	n = max(n, 10*qsUnit)
	shardLimit := min(max(size/64, 64<<10), 1<<20)
	w, err := mds.NewWriter(dir, &mds.WriterOptions{
		Columns: map[string]string{
			"id": "int", "image": "jpeg", "caption": "str", "features": "ndarray:float32:64",
			"audio": "ndarray:int16", "label": "uint8",
		},
		Compression: "zstd", Hashes: []string{"xxh64"}, SizeLimit: shardLimit,
	})
	if err != nil {
		return 0, nil, err
	}
	defer w.Close()
	r := rand.New(rand.NewPCG(2026, 11))
	words := strings.Fields("a small red fox jumps over the lazy brown dog near quiet river under bright blue sky while children play with colorful kites")
	img := image.NewRGBA(image.Rect(0, 0, 48, 48))
	for i := range n {
		// A smooth gradient with a little noise: a plausible photo.
		r0, g0, b0 := r.IntN(256), r.IntN(256), r.IntN(256)
		for y := range 48 {
			for x := range 48 {
				o := img.PixOffset(x, y)
				img.Pix[o], img.Pix[o+1], img.Pix[o+2], img.Pix[o+3] = uint8(r0+x*2), uint8(g0+y*2), uint8(b0+r.IntN(24)), 255
			}
		}
		var cap strings.Builder
		for k := range 20 + r.IntN(40) {
			if k > 0 {
				cap.WriteByte(' ')
			}
			cap.WriteString(words[r.IntN(len(words))])
		}
		feat := make([]byte, 64*4)
		for k := range 64 {
			bits := math.Float32bits(float32(r.NormFloat64()))
			feat[4*k], feat[4*k+1], feat[4*k+2], feat[4*k+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
		}
		samples := 1000 + r.IntN(3000)
		audio := make([]byte, 2*samples)
		phase := r.Float64()
		for k := range samples {
			v := int16(8000*math.Sin(phase+float64(k)/8) + float64(r.IntN(2000)))
			audio[2*k], audio[2*k+1] = byte(v), byte(uint16(v)>>8)
		}
		err := w.Write(format.Sample{
			"id": int64(i), "image": image.Image(img), "caption": cap.String(),
			"features": &format.NDArray{DType: "float32", Shape: []int{64}, Data: feat},
			"audio":    &format.NDArray{DType: "int16", Shape: []int{samples}, Data: audio},
			"label":    uint8(r.IntN(10)),
		})
		if err != nil {
			return 0, nil, err
		}
	}
	if err := w.Finish(); err != nil {
		return 0, nil, err
	}
	info := w.Shards()
	for _, s := range info {
		if s.ZipData == nil {
			return 0, nil, errors.New("quickstart: writer produced an uncompressed shard")
		}
	}
	return n, info, nil
}

// quickstartDemoDir is the directory the closing hint suggests when the
// run's own directory is removed on exit.
const quickstartDemoDir = "./sluice-quickstart"

// quickstartHint is the closing hint: a stream command for the dataset.
// It names dir only when dir is kept; otherwise it names the directory a
// rerun with --dir would keep, and says so.
func quickstartHint(dir string, kept bool, limitMB int64) string {
	var b strings.Builder
	if kept {
		fmt.Fprintf(&b, "Files kept in %s. Stream the dataset as one rank would:\n", dir)
	} else {
		fmt.Fprintf(&b, "The working directory was removed. Keep the files with `sluice quickstart --dir %s`, then stream the dataset as one rank would:\n", quickstartDemoDir)
	}
	src, cache := "file://"+filepath.Join(dir, "remote"), filepath.Join(dir, "cache", "cli")
	if !kept {
		src, cache = quickstartDemoDir+"/remote", quickstartDemoDir+"/cache/cli"
	}
	fmt.Fprintf(&b, "   sluice stream %s --local %s --cache-limit %dmb --shuffle --batch-size %d --step-time 20ms\n",
		src, cache, limitMB, qsBatch)
	return b.String()
}
