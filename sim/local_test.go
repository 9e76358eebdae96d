package sim

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/sluicedata/sluice/plan"
)

// A node numbers its shards in the order it meets them (node.local); the
// reports must be those of the dataset's numbering to the bit, every tie
// the model breaks by shard (eviction candidates, completions at one
// time) broken by the dataset's index, over epochs that bring new shards
// to a node, with and without turns.
func TestLocalShardNumbers(t *testing.T) {
	sizes := make([]int64, 600)
	for i := range sizes {
		sizes[i] = 100
	}
	for _, tc := range []struct {
		name  string
		algo  string
		limit int64
		turns bool
		rank  bool
	}{
		{"py1e", plan.AlgoPy1e, 1 << 30, false, false},
		{"py1e-turns", plan.AlgoPy1e, 1 << 30, true, false},
		{"py1s-turns", plan.AlgoPy1s, 1 << 30, true, false},
		{"py1b-rank", plan.AlgoPy1b, 1 << 30, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := func(inOrder bool) *Config {
				return &Config{
					Dataset:         UniformDataset(sizes, 100_000, 240_000),
					Plan:            plan.Options{BatchSize: 4, Shuffle: true, ShuffleAlgo: tc.algo},
					Shape:           plan.Shape{Nodes: 3, RanksPerNode: 2, WorkersPerRank: 4},
					Store:           Store{Latency: 20 * time.Millisecond, BandwidthPerNode: 1e9},
					StepTime:        Fixed(50 * time.Millisecond),
					CacheLimit:      tc.limit,
					Epochs:          3,
					OrderAdmissions: tc.turns,
					RankIterator:    tc.rank,
					KeepSteps:       true,
					shardsInOrder:   inOrder,
				}
			}
			want, err := Run(context.Background(), cfg(true))
			if err != nil {
				t.Fatal(err)
			}
			var ev int64
			for _, n := range want.Nodes {
				ev += n.Evictions
			}
			if ev == 0 {
				t.Fatal("no evictions: not a test")
			}
			got, err := Run(context.Background(), cfg(false))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("shards numbered as met: report differs from the dataset's numbering:\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// A node's compact runs are the schedule's (plan.Schedule.Runs), their
// shards numbered locally, over epochs that bring new shards.
func TestShardRunsMatchSchedule(t *testing.T) {
	sizes := make([]int64, 300)
	for i := range sizes {
		sizes[i] = 5 + int64(i%9)
	}
	c := &Config{
		Dataset: UniformDataset(sizes, 100, 500),
		Plan:    plan.Options{BatchSize: 4, Shuffle: true},
		Shape:   plan.Shape{Nodes: 2, RanksPerNode: 2, WorkersPerRank: 2},
	}
	p, err := plan.New([]plan.Stream{{ShardSizes: sizes}}, &c.Plan)
	if err != nil {
		t.Fatal(err)
	}
	tr := p.NewTracker()
	nd := newNode(c, 1)
	var buf []shardRun
	for epoch := range 3 {
		spec, err := tr.Begin(c.Shape)
		if err != nil {
			t.Fatal(err)
		}
		ep, err := p.Epoch(spec)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ep.NodeSchedule(1)
		if err != nil {
			t.Fatal(err)
		}
		want := sc.Runs()
		buf = nd.shardRuns(sc, buf)
		if len(buf) != len(want) {
			t.Fatalf("epoch %d: %d runs, the schedule has %d", epoch, len(buf), len(want))
		}
		for i, r := range buf {
			w := want[i]
			if r.Start() != w.Start || r.Len() != w.Len || int(nd.gid[r.Shard()]) != w.Shard || nd.lid[w.Shard] != int32(r.Shard()) {
				t.Fatalf("epoch %d, run %d: {%d %d local %d = %d}, the schedule's %+v", epoch, i, r.Start(), r.Len(), r.Shard(), nd.gid[r.Shard()], w)
			}
		}
	}
	if len(nd.gid) == 0 || len(nd.state) != len(nd.gid) || len(nd.vic.at) != len(nd.gid) {
		t.Fatalf("%d local shards, tables of %d and %d", len(nd.gid), len(nd.state), len(nd.vic.at))
	}
}
