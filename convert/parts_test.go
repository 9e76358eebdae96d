package convert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// canonical renders samples as sorted JSON lines, for comparing contents
// regardless of order.
func canonical(t *testing.T, samples []format.Sample) []string {
	t.Helper()
	out := make([]string, len(samples))
	for i, s := range samples {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	sort.Strings(out)
	return out
}

func TestPartsMergeEqualsSingle(t *testing.T) {
	dir := t.TempDir()
	jsonl := filepath.Join(dir, "in.jsonl")
	writeFile(t, jsonl, jsonlRecords(2500))
	tars := filepath.Join(dir, "tars")
	writeTars(t, tars, 5, 9)
	for _, c := range []struct {
		name, input string
		parts       int
	}{
		{"jsonl-items", jsonl, 3}, // one file: records dealt round-robin
		{"tar-files", filepath.Join(tars, "shard-{000000..000004}.tar"), 2}, // files dealt round-robin
	} {
		t.Run(c.name, func(t *testing.T) {
			single := filepath.Join(dir, c.name+"-single")
			runConvert(t, &Options{Input: c.input, Output: single, SizeLimit: 8 << 10})
			multi := filepath.Join(dir, c.name+"-multi")
			for i := range c.parts {
				rep := runConvert(t, &Options{Input: c.input, Output: multi, SizeLimit: 8 << 10, Part: input.Part{Index: i, Count: c.parts}})
				if rep.Part == nil || rep.Part.Index != i {
					t.Fatalf("part report %+v", rep.Part)
				}
			}
			// Each part alone is deterministic: converting it again elsewhere
			// gives the same bytes.
			again := filepath.Join(dir, c.name+"-again")
			runConvert(t, &Options{Input: c.input, Output: again, SizeLimit: 8 << 10, Part: input.Part{Index: 1, Count: c.parts}})
			sameDataFiles(t, filepath.Join(multi, PartDir(1, c.parts)), filepath.Join(again, PartDir(1, c.parts)))

			if _, err := mds.Merge(multi); err != nil {
				t.Fatal(err)
			}
			a, b := readDataset(t, single), readDataset(t, multi)
			if diff := cmp.Diff(canonical(t, a), canonical(t, b)); diff != "" {
				t.Fatalf("merged parts differ from a single conversion (-single +merged):\n%s", diff)
			}
			raw, err := os.ReadFile(filepath.Join(multi, ReportFile))
			if err != nil {
				t.Fatal(err)
			}
			var combined Report
			if err := json.Unmarshal(raw, &combined); err != nil {
				t.Fatal(err)
			}
			if len(combined.Parts) != c.parts || combined.SamplesOut != int64(len(a)) {
				t.Fatalf("combined report: %d parts, %d samples; want %d, %d", len(combined.Parts), combined.SamplesOut, c.parts, len(a))
			}
		})
	}
}

func TestPartDir(t *testing.T) {
	for _, c := range []struct {
		i, n int
		want string
	}{{0, 1, "part-0"}, {3, 10, "part-3"}, {3, 11, "part-03"}, {42, 1000, "part-042"}} {
		if got := PartDir(c.i, c.n); got != c.want {
			t.Errorf("PartDir(%d, %d) = %q, want %q", c.i, c.n, got, c.want)
		}
	}
	_ = fmt.Sprint()
}
