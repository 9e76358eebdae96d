package plan_test

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/plan"
)

// launcherCase is one case of testdata/launchers.json, which the Python
// client's tests read too.
type launcherCase struct {
	Name  string            `json:"name"`
	Env   map[string]string `json:"env"`
	Error string            `json:"error"`
	Want  *struct {
		Nodes        int      `json:"nodes"`
		RanksPerNode int      `json:"ranks_per_node"`
		Rank         int      `json:"rank"`
		LocalRank    int      `json:"local_rank"`
		Launcher     string   `json:"launcher"`
		Outer        []string `json:"outer"`
		JobID        string   `json:"job_id"`
	} `json:"want"`
}

func TestDetectWorld(t *testing.T) {
	data, err := os.ReadFile("testdata/launchers.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []launcherCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) < 20 {
		t.Fatalf("only %d cases", len(doc.Cases))
	}
	for _, c := range doc.Cases {
		t.Run(c.Name, func(t *testing.T) {
			got, err := plan.DetectWorld(func(k string) string { return c.Env[k] })
			switch c.Error {
			case "invalid":
				if !errors.Is(err, plan.ErrInvalid) {
					t.Fatalf("error %v, want ErrInvalid (placement %+v)", err, got)
				}
				return
			case "conflict":
				if !errors.Is(err, plan.ErrLauncherConflict) {
					t.Fatalf("error %v, want ErrLauncherConflict (placement %+v)", err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := c.Want
			if got.Nodes != w.Nodes || got.RanksPerNode != w.RanksPerNode || got.Rank != w.Rank ||
				got.LocalRank != w.LocalRank || got.Launcher != w.Launcher || got.JobID != w.JobID ||
				!slices.Equal(got.Outer, w.Outer) {
				t.Errorf("placement %+v, want %+v", got, *w)
			}
		})
	}
}

func TestDetectWorldAgreesWithWorldFromEnv(t *testing.T) {
	// With torchrun's variables only, detection is MosaicML's reading.
	env := map[string]string{"RANK": "3", "WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "3"}
	get := func(k string) string { return env[k] }
	p, err := plan.DetectWorld(get)
	if err != nil {
		t.Fatal(err)
	}
	w, err := plan.WorldFromEnv(get)
	if err != nil {
		t.Fatal(err)
	}
	if p.World != w {
		t.Errorf("DetectWorld %+v, WorldFromEnv %+v", p.World, w)
	}
}
