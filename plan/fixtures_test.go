package plan_test

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/plan"
)

// orderCase is one case of fixtures/order/orders_a.json.
type orderCase struct {
	Params struct {
		Shuffle           bool   `json:"shuffle"`
		ShuffleAlgo       string `json:"shuffle_algo"`
		ShuffleSeed       int64  `json:"shuffle_seed"`
		NumCanonicalNodes int    `json:"num_canonical_nodes"`
		ShuffleBlockSize  *int64 `json:"shuffle_block_size"`
		BatchSize         int    `json:"batch_size"`
		PartitionAlgo     string `json:"partition_algo"`
		SamplingMethod    string `json:"sampling_method"`
		BatchingMethod    string `json:"batching_method"`
	} `json:"params"`
	World struct {
		NumNodes       int `json:"num_nodes"`
		RanksPerNode   int `json:"ranks_per_node"`
		WorkersPerRank int `json:"workers_per_rank"`
	} `json:"world"`
	Epoch                int64   `json:"epoch"`
	SampleInEpoch        int64   `json:"sample_in_epoch"`
	InitialPhysicalNodes *int    `json:"initial_physical_nodes"`
	NumSamples           int64   `json:"num_samples"`
	ShardSizes           []int64 `json:"shard_sizes"`
	Resolved             struct {
		NumCanonicalNodes int   `json:"num_canonical_nodes"`
		ShuffleBlockSize  int64 `json:"shuffle_block_size"`
	} `json:"resolved"`
	WorkShape   [5]int               `json:"work_shape"`
	Work        []int64              `json:"work"`
	RankBatches map[string][][]int64 `json:"rank_batches"`
}

func (c *orderCase) name(i int) string {
	p := c.Params
	return fmt.Sprintf("%03d_%s_shuffle=%v_ncn=%d_%dx%dx%d_e%d_s%d", i, p.ShuffleAlgo, p.Shuffle, p.NumCanonicalNodes,
		c.World.NumNodes, c.World.RanksPerNode, c.World.WorkersPerRank, c.Epoch, c.SampleInEpoch)
}

func loadOrderCases(t testing.TB) []orderCase {
	t.Helper()
	b, err := readGzip("testdata/orders_a.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []orderCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("orders_a.json: %v", err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("orders_a.json: no cases")
	}
	return f.Cases
}

func (c *orderCase) options() *plan.Options {
	p := c.Params
	o := &plan.Options{Shuffle: p.Shuffle, ShuffleAlgo: p.ShuffleAlgo, ShuffleSeed: &p.ShuffleSeed,
		NumCanonicalNodes: p.NumCanonicalNodes, BatchSize: p.BatchSize, PartitionAlgo: p.PartitionAlgo,
		SamplingMethod: p.SamplingMethod, BatchingMethod: p.BatchingMethod}
	if p.ShuffleBlockSize != nil {
		o.ShuffleBlockSize = *p.ShuffleBlockSize
	}
	return o
}

func TestOrdersFixture(t *testing.T) {
	for i, c := range loadOrderCases(t) {
		t.Run(c.name(i), func(t *testing.T) {
			p, err := plan.New([]plan.Stream{{ShardSizes: c.ShardSizes}}, c.options())
			if err != nil {
				t.Fatal(err)
			}
			if p.NumSamples() != c.NumSamples {
				t.Fatalf("samples = %d, want %d", p.NumSamples(), c.NumSamples)
			}
			spec := plan.EpochSpec{Epoch: c.Epoch, SampleInEpoch: c.SampleInEpoch,
				Shape: plan.Shape{Nodes: c.World.NumNodes, RanksPerNode: c.World.RanksPerNode, WorkersPerRank: c.World.WorkersPerRank}}
			if c.InitialPhysicalNodes != nil {
				spec.InitialPhysicalNodes = *c.InitialPhysicalNodes
			}
			ep, err := p.Epoch(spec)
			if err != nil {
				t.Fatal(err)
			}
			got := ep.Spec()
			if got.NumCanonicalNodes != c.Resolved.NumCanonicalNodes || got.ShuffleBlockSize != c.Resolved.ShuffleBlockSize {
				t.Errorf("resolved ncn %d block %d, want %d %d", got.NumCanonicalNodes, got.ShuffleBlockSize,
					c.Resolved.NumCanonicalNodes, c.Resolved.ShuffleBlockSize)
			}
			shape, work, err := ep.Work()
			if err != nil {
				t.Fatal(err)
			}
			if shape != c.WorkShape {
				t.Fatalf("work shape = %v, want %v", shape, c.WorkShape)
			}
			if d := cmp.Diff(c.Work, work); d != "" {
				t.Errorf("work (-want +got):\n%s", d)
			}
			ws, err := ep.WorkShape()
			if err != nil || ws != c.WorkShape {
				t.Errorf("WorkShape() = %v, %v; want %v", ws, err, c.WorkShape)
			}
			ranks := c.World.NumNodes * c.World.RanksPerNode
			if len(c.RankBatches) != ranks {
				t.Fatalf("fixture has %d ranks of batches, want %d", len(c.RankBatches), ranks)
			}
			for r := range ranks {
				b, err := ep.RankBatches(r/c.World.RanksPerNode, r%c.World.RanksPerNode)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(c.RankBatches[strconv.Itoa(r)], b); d != "" {
					t.Errorf("rank %d batches (-want +got):\n%s", r, d)
				}
			}
		})
	}
}

// TestStateDictsFixture resumes from MosaicML's real state dicts and checks
// the batches each rank yields afterwards, and that the Tracker computes the
// same state dict from the batches seen before.
func TestStateDictsFixture(t *testing.T) {
	for i, c := range loadStateFixtures(t) {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			b, err := os.ReadFile("testdata/" + c.Dataset + "/index.json")
			if err != nil {
				t.Fatal(err)
			}
			sizes := shardSizesFromIndex(t, b)
			pr := c.Params
			opts := &plan.Options{Shuffle: pr.Shuffle, ShuffleAlgo: pr.ShuffleAlgo, ShuffleSeed: &pr.ShuffleSeed,
				NumCanonicalNodes: pr.NumCanonicalNodes, BatchSize: pr.BatchSize}
			if pr.ShuffleBlockSize != nil {
				opts.ShuffleBlockSize = *pr.ShuffleBlockSize
			}
			p, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			want, err := plan.ParseState(c.StateDict)
			if err != nil {
				t.Fatal(err)
			}
			for r := range c.WorldSize {
				world := plan.World{Nodes: 1, RanksPerNode: c.WorldSize, Rank: r}
				shape, err := world.Shape(c.WorkersPerRank)
				if err != nil {
					t.Fatal(err)
				}

				// The run before the checkpoint.
				tr := p.NewTracker()
				spec, err := tr.Begin(shape)
				if err != nil {
					t.Fatal(err)
				}
				ep, err := p.Epoch(spec)
				if err != nil {
					t.Fatal(err)
				}
				all, err := ep.RankBatches(0, r)
				if err != nil {
					t.Fatal(err)
				}
				before := c.BatchesBefore[strconv.Itoa(r)]
				if d := cmp.Diff(before, all[:len(before)]); d != "" {
					t.Errorf("rank %d batches before (-want +got):\n%s", r, d)
				}
				var yielded int64
				for _, batch := range before {
					yielded += int64(len(batch))
				}
				st, err := tr.State(world, yielded)
				if err != nil {
					t.Fatal(err)
				}
				if st != want {
					t.Errorf("rank %d state = %+v, want %+v", r, st, want)
				}

				// A fresh run resumed from the state.
				tr = p.NewTracker()
				if err := tr.Load(want); err != nil {
					t.Fatal(err)
				}
				if spec, err = tr.Begin(shape); err != nil {
					t.Fatal(err)
				}
				if ep, err = p.Epoch(spec); err != nil {
					t.Fatal(err)
				}
				after, err := ep.RankBatches(0, r)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(c.BatchesAfterResume[strconv.Itoa(r)], after); d != "" {
					t.Errorf("rank %d batches after resume (-want +got):\n%s", r, d)
				}
			}
		})
	}
}

func readGzip(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// shardSizesFromIndex reads the samples field of every shard of an
// index.json.
func shardSizesFromIndex(t *testing.T, b []byte) []int64 {
	t.Helper()
	var idx struct {
		Shards []struct {
			Samples int64 `json:"samples"`
		} `json:"shards"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, s := range idx.Shards {
		sizes = append(sizes, s.Samples)
	}
	return sizes
}
