package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/agentapi"
)

// isMappedCopies reports whether path is a memory file of copies
// (iteration_map.go).
func isMappedCopies(path string) bool {
	return strings.HasPrefix(path, filepath.Join(mapDir, mapPrefix))
}

// ownMappedFiles lists this process's memory files of copies.
func ownMappedFiles(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(mapDir, fmt.Sprintf("%s%d-*", mapPrefix, os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMappedCopiesValidUntilReleased: a client that asks for mapped copies
// and holds every batch it was sent, releasing none, reads each record
// intact from the mapping it made when the batch came, after the whole
// epoch: the agent reuses a block of its memory file only once every copy
// in it was released, and when none is free it copies into the heap and
// sends those inline. Every sample once, in the plan's order. Once the
// batches are released and the connection closed, no memory file of this
// agent is left.
func TestMappedCopiesValidUntilReleased(t *testing.T) {
	if _, err := os.Stat(mapDir); err != nil {
		t.Skipf("no %s: %v", mapDir, err)
	}
	rc := recordCase{"40KB mapped", 40 << 10, 600, 1 << 20, 0, true}
	h := rc.start(t, nil)
	_, total, _ := limitFor(t, h.remote, 0)
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	want := planIDs(t, h, 1, w)[0]
	c := h.dial()
	iter := begin(t, h, c, 2*total, "j", "", w)
	type held struct {
		sample int64
		rec    []byte // a view of the mapping, or a copy of the inline record
	}
	var recs []held
	var maps [][]byte
	defer func() {
		for _, m := range maps {
			unix.Munmap(m)
		}
	}()
	mapped, inline := 0, 0
	ctx := context.Background()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("%d samples in 60 s", len(recs))
		}
		b, err := c.Next(ctx, agentapi.Next{Iter: iter, Max: 64, MapCopies: true})
		if err != nil {
			t.Fatal(err)
		}
		if b.Done {
			break
		}
		views := map[string][]byte{}
		for _, e := range b.Entries {
			if e.Ref&agentapi.InlineFlag != 0 {
				inline++
				// The client reads the next reply into the same buffer.
				recs = append(recs, held{e.Sample, slices.Clone(b.Inline[e.Offset : e.Offset+uint64(e.Length)])})
				continue
			}
			s := b.Shards[e.Ref]
			v, ok := views[s.Path]
			if !ok {
				f, err := os.Open(s.Path)
				if err != nil {
					t.Fatal(err)
				}
				v, err = unix.Mmap(int(f.Fd()), 0, int(s.Size), unix.PROT_READ, unix.MAP_SHARED)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				maps = append(maps, v)
				views[s.Path] = v
			}
			if isMappedCopies(s.Path) {
				mapped++
			}
			recs = append(recs, held{e.Sample, v[e.Offset : e.Offset+uint64(e.Length)]})
		}
	}
	ids := make([]int64, len(recs))
	for i, r := range recs {
		ids[i] = r.sample
		if got := int64(binary.LittleEndian.Uint64(r.rec[4:12])); got != r.sample {
			t.Fatalf("after the epoch, the record of sample %d (the %dth) holds id %d: its bytes were reused while its batch was held", r.sample, i, got)
		}
		if got, want := string(r.rec[12:]), recordText(r.sample, rc.size); got != want {
			t.Fatalf("after the epoch, the record of sample %d holds another text", r.sample)
		}
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("%d samples not in the plan's order (%d planned)", len(ids), len(want))
	}
	t.Logf("%d records mapped from the memory file, %d inline", mapped, inline)
	// 600 records of 40 KB held: the 16 MiB file holds about 400, the
	// rest waits for the leased bound or is copied into the heap.
	if mapped == 0 || mapped*40<<10 > mapSize {
		t.Errorf("%d records mapped, want some and no more than the file holds", mapped)
	}
	if files := ownMappedFiles(t); len(files) != 1 {
		t.Errorf("memory files during the iteration: %v, want one", files)
	}
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); len(ownMappedFiles(t)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("memory files left after the connection closed: %v", ownMappedFiles(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMappedCopiesFileReused: a connection's next iteration writes its
// copies into the file the ended one used (its pages stay allocated and
// mapped in the client), and an agent's memory files left by an agent
// that no longer runs are removed when a new one is made.
func TestMappedCopiesFileReused(t *testing.T) {
	if _, err := os.Stat(mapDir); err != nil {
		t.Skipf("no %s: %v", mapDir, err)
	}
	// A dead process's pid names the file of a killed agent.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	stale := filepath.Join(mapDir, fmt.Sprintf("%s%d-0123456789abcdef", mapPrefix, cmd.Process.Pid))
	if err := os.WriteFile(stale, []byte("left"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(stale)
	rc := recordCase{"40KB mapped", 40 << 10, 200, 1 << 20, 0, true}
	h := rc.start(t, nil)
	_, total, _ := limitFor(t, h.remote, 0)
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	want := planIDs(t, h, 2, w)
	c := h.dial()
	var paths []string
	for epoch := range 2 {
		r := rc.reader(t, c, begin(t, h, c, 2*total, "j", "", w), 32)
		r.epoch(epoch, want[epoch])
		if r.mapped == 0 {
			t.Fatalf("epoch %d: no record read from a memory file", epoch)
		}
		if err := c.End(context.Background(), r.iter); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, ownMappedFiles(t)...)
	}
	if len(paths) != 2 || paths[0] != paths[1] {
		t.Errorf("the memory files after each epoch: %v, want the same one", paths)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a dead agent's memory file is still there (%v)", err)
	}
}
