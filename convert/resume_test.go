package convert

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestKillChild is the body of the child process TestKillAndResume
// starts: it converts and SIGKILLs itself at the requested point.
func TestKillChild(t *testing.T) {
	in, out := os.Getenv("SLUICE_KILL_IN"), os.Getenv("SLUICE_KILL_OUT")
	if in == "" {
		t.Skip("helper process for TestKillAndResume")
	}
	event := os.Getenv("SLUICE_KILL_EVENT")
	at, _ := strconv.Atoi(os.Getenv("SLUICE_KILL_SHARD"))
	opts := killOptions(in, out)
	opts.testHook = func(ev string, shard int) {
		if ev == event && shard == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal ends the process
		}
	}
	runConvert(t, opts)
	t.Fatal("conversion finished without being killed")
}

func killOptions(in, out string) *Options {
	return &Options{Input: in, Output: out, Compression: "zstd", Hashes: []string{"xxh64"}, SizeLimit: 24 << 10, BatchSize: 64}
}

func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeFile(t, in, jsonlRecords(6000))
	ref := filepath.Join(dir, "ref")
	whole := runConvert(t, killOptions(in, ref))
	if whole.Shards < 10 {
		t.Fatalf("reference has %d shards; the test wants many", whole.Shards)
	}
	for _, c := range []struct {
		event   string
		shard   int
		resumed int
	}{
		{"journal", 3, 4}, // killed right after shard 3 was journaled
		{"shard", 6, 6},   // killed after shard 6 was stored, before its journal entry (at most 6 kept)
		{"journal", 0, 1},
	} {
		t.Run(c.event+strconv.Itoa(c.shard), func(t *testing.T) {
			out := filepath.Join(dir, c.event+strconv.Itoa(c.shard))
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "SLUICE_KILL_IN="+in, "SLUICE_KILL_OUT="+out,
				"SLUICE_KILL_EVENT="+c.event, "SLUICE_KILL_SHARD="+strconv.Itoa(c.shard))
			outb, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("child: %v\n%s", err, outb)
			}
			ws, ok := ee.Sys().(syscall.WaitStatus)
			if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die of SIGKILL: %v\n%s", err, outb)
			}
			if _, err := os.Stat(filepath.Join(out, "index.json")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("killed run left an index.json (err %v)", err)
			}
			rep := runConvert(t, killOptions(in, out))
			// Killed after a journal entry: exactly the journaled shards are
			// kept. Killed after a shard upload: uploads run ahead of the
			// journal, so up to that many shards are kept.
			if (c.event == "journal" && rep.ResumedShards != c.resumed) || rep.ResumedShards > c.resumed {
				t.Errorf("resumed after %d shards, want %d", rep.ResumedShards, c.resumed)
			}
			if rep.SamplesIn != whole.SamplesIn || rep.SamplesOut != whole.SamplesOut || rep.Shards != whole.Shards || rep.StoredBytes != whole.StoredBytes {
				t.Errorf("resumed report %+v differs from uninterrupted %+v", rep.Stats, whole.Stats)
			}
			if _, err := os.Stat(filepath.Join(out, JournalDir)); err == nil {
				entries, _ := os.ReadDir(filepath.Join(out, JournalDir))
				if len(entries) > 0 {
					t.Errorf("journal left behind: %d entries", len(entries))
				}
			}
			sameDataFiles(t, ref, out)
		})
	}
}

func TestResumeRefusesOtherSettings(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeFile(t, in, jsonlRecords(2000))
	out := filepath.Join(dir, "out")
	opts := killOptions(in, out)
	opts.Registry = testRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts.testHook = func(ev string, shard int) {
		if ev == "journal" && shard == 1 {
			cancel()
		}
	}
	if _, err := Run(ctx, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: err = %v", err)
	}
	other := killOptions(in, out)
	other.Compression = "gz"
	if _, err := runConvertErr(t, other); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Fatalf("resume with other settings: err = %v", err)
	}
	// The same settings resume and finish.
	rep := runConvert(t, killOptions(in, out))
	if rep.ResumedShards < 2 || rep.SamplesOut != 2000 {
		t.Fatalf("resumed %d shards, wrote %d samples", rep.ResumedShards, rep.SamplesOut)
	}
}
