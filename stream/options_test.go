package stream_test

import (
	"testing"

	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
)

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"100", 100, false}, {"100b", 100, false}, {"1kb", 1024, false}, {"1.5kb", 1536, false},
		{"10gb", 10 << 30, false}, {" 2MB ", 2 << 20, false}, {"0", 0, false},
		{"", 0, true}, {"-1kb", 0, true}, {"kb", 0, true}, {"1.5xb", 0, true}, {"nan", 0, true},
		{"1e30eb", 0, true},
		// IEC spellings: the same powers of 1024.
		{"10GiB", 10 << 30, false}, {"1.5kib", 1536, false}, {"3 MiB", 3 << 20, false}, {"1eib", 1 << 60, false},
		{"ib", 0, true}, {"1gi", 0, true}, {"1gibb", 0, true},
	} {
		got, err := stream.ParseBytes(c.in)
		if c.bad != (err != nil) || got != c.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d (error: %v)", c.in, got, err, c.want, c.bad)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"100", "1.5kb", "10gb", "-3", "1e300pb", "0.0001b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := stream.ParseBytes(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseBytes(%q) = %d", s, n)
		}
	})
}

func TestWorldFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		name string
		env  map[string]string
		want plan.World
	}{
		{"none", nil, plan.World{Nodes: 1, RanksPerNode: 1, Rank: 0}},
		{"torchrun", map[string]string{"RANK": "5", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}, plan.World{Nodes: 2, RanksPerNode: 4, Rank: 5}},
		{"slurm", map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "6", "SLURM_NTASKS_PER_NODE": "3"}, plan.World{Nodes: 2, RanksPerNode: 3, Rank: 3}},
		{"slurm-tasks-per-node", map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_TASKS_PER_NODE": "2(x2)"}, plan.World{Nodes: 2, RanksPerNode: 2, Rank: 1}},
		{"torchrun-wins", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "SLURM_PROCID": "7"}, plan.World{Nodes: 1, RanksPerNode: 2, Rank: 0}},
	} {
		got, err := stream.WorldFromEnv(env(c.env))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if _, err := stream.WorldFromEnv(env(map[string]string{"SLURM_PROCID": "x", "SLURM_NTASKS": "2"})); err == nil {
		t.Error("a non-integer SLURM_PROCID was accepted")
	}
}
