package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/agentapi"
)

// memfdTag is how a memory file of copies shows in /proc/<pid>/maps and
// as the target of /proc/<pid>/fd links.
const memfdTag = "/memfd:" + mapName

// procLines returns the lines of /proc/<pid>/maps that mention s.
func procLines(t *testing.T, pid int, s string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "maps"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// memfdFDs counts the descriptors of pid open on memory files of copies.
func memfdFDs(t *testing.T, pid int) int {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, memfdTag) {
			n++
		}
	}
	return n
}

// skipNoProc skips a test that reads /proc (Linux).
func skipNoProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
}

// mapCase serves records of 40 KB read with mapped copies, n of them,
// and returns the agent, a client, a cache limit that holds them all and
// a world of one worker.
func mapCase(t *testing.T, n int) (recordCase, *harness, *agentapi.Client, int64, agentapi.World) {
	t.Helper()
	rc := recordCase{"40KB mapped", 40 << 10, n, 1 << 20, 0, true}
	h := rc.start(t, nil)
	_, total, _ := limitFor(t, h.remote, 0)
	return rc, h, h.dial(), 2 * total, agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
}

// untilMapped reads r until a record came from a memory file, within 60 s.
func (r *reader) untilMapped() {
	r.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); r.mapped == 0; r.next() {
		if time.Now().After(deadline) || r.done {
			r.t.Fatalf("no record read from a memory file (%d samples)", len(r.ids))
		}
	}
}

// TestMappedCopiesValidUntilReleased: a client that asks for mapped copies
// and holds every batch it was sent, releasing none, reads each record
// intact from the memory file's mapping after the whole epoch: the agent
// reuses a block of its memory file only once every copy in it was
// released, and when none is free it copies into the heap and sends those
// inline. Every sample once, in the plan's order. The file has no name;
// once the connection is closed, no descriptor or mapping of it is left
// in the process (agent and client).
func TestMappedCopiesValidUntilReleased(t *testing.T) {
	skipNoProc(t)
	rc, h, c, limit, w := mapCase(t, 600)
	want := planIDs(t, h, 1, w)[0]
	iter := begin(t, h, c, limit, "j", "", w)
	type held struct {
		sample int64
		rec    []byte // a view of the memory file's mapping, or a copy
	}
	var recs []held
	mapped, inline, fds := 0, 0, 0
	ctx := context.Background()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("%d samples in 60 s", len(recs))
		}
		b, err := c.Next(ctx, agentapi.Next{Iter: iter, Max: 64, MapCopies: true})
		if err != nil {
			t.Fatal(err)
		}
		if b.MemFD != 0 {
			fds++
		}
		if b.Done {
			break
		}
		for _, e := range b.Entries {
			var rec []byte
			switch s := b.Shards[e.Ref&^agentapi.InlineFlag]; {
			case e.Ref&agentapi.InlineFlag != 0:
				inline++
				// The client reads the next reply into the same buffer.
				rec = slices.Clone(b.Inline[e.Offset : e.Offset+uint64(e.Length)])
			case s.Mem != 0:
				if s.Path != "" {
					t.Fatalf("a memory file listed with a path, %q", s.Path)
				}
				mapped++
				rec = b.Mapped[e.Ref][e.Offset : e.Offset+uint64(e.Length)]
			default:
				data, err := os.ReadFile(s.Path)
				if err != nil {
					t.Fatal(err)
				}
				rec = data[e.Offset : e.Offset+uint64(e.Length)]
			}
			recs = append(recs, held{e.Sample, rec})
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
	if fds != 1 {
		t.Errorf("the memory file's descriptor came %d times, want once", fds)
	}
	self := os.Getpid()
	if n := memfdFDs(t, self); n != 1 {
		t.Errorf("%d descriptors on memory files during the iteration, want the agent's one (the client closes its own once mapped)", n)
	}
	if l := procLines(t, self, "/dev/shm/"); len(l) > 0 {
		t.Errorf("files of /dev/shm mapped: %q", l)
	}
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); memfdFDs(t, self) > 0 || len(procLines(t, self, memfdTag)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("after the connection closed: %d descriptors and mappings %q of memory files left", memfdFDs(t, self), procLines(t, self, memfdTag))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMappedCopiesFileReused: a connection's next iteration writes its
// copies into the file the ended one used (its pages stay allocated and
// mapped in the client), whose descriptor the client was sent once.
func TestMappedCopiesFileReused(t *testing.T) {
	rc, h, c, limit, w := mapCase(t, 200)
	want := planIDs(t, h, 2, w)
	var mems, fds []int
	for epoch := range 2 {
		r := rc.reader(t, c, begin(t, h, c, limit, "j", "", w), 32)
		r.epoch(epoch, want[epoch])
		if r.mapped == 0 {
			t.Fatalf("epoch %d: no record read from a memory file", epoch)
		}
		if err := c.End(context.Background(), r.iter); err != nil {
			t.Fatal(err)
		}
		mems = append(mems, r.mems...)
		fds = append(fds, r.memFDs...)
	}
	if len(mems) != 2 || mems[0] != mems[1] {
		t.Errorf("the memory files of each epoch: %v, want the same one", mems)
	}
	if len(fds) != 1 {
		t.Errorf("memory files' descriptors sent: %v, want one", fds)
	}
}

// TestMappedCopiesUnmapped: a memory file the connection does not keep
// for its next iterations (mapIdle kept, one more ended) is named in the
// next reply's Unmap, and the client unmaps it.
func TestMappedCopiesUnmapped(t *testing.T) {
	skipNoProc(t)
	rc, h, c, limit, w := mapCase(t, 200)
	var rs []*reader
	for range mapIdle + 1 {
		r := rc.reader(t, c, begin(t, h, c, limit, "j", "", w), 16)
		r.untilMapped()
		rs = append(rs, r)
	}
	self := os.Getpid()
	// The agent's mapping and the client's of each file.
	if got, want := len(procLines(t, self, memfdTag)), 2*(mapIdle+1); got != want {
		t.Fatalf("%d mappings of memory files with %d iterations, want %d", got, mapIdle+1, want)
	}
	for _, r := range rs {
		if err := c.End(context.Background(), r.iter); err != nil {
			t.Fatal(err)
		}
	}
	r := rc.reader(t, c, begin(t, h, c, limit, "j", "", w), 16)
	r.next()
	// One file closed by the agent and unmapped by the client; the
	// others kept by both, one of them the new iteration's.
	if got, want := len(procLines(t, self, memfdTag)), 2*mapIdle; got != want {
		t.Errorf("%d mappings of memory files after the next reply, want %d", got, want)
	}
}

// mapKillEnv names the file where TestMappedCopiesKillChild, run as a
// child process, writes where its agent serves.
const mapKillEnv = "SLUICE_TEST_MAPKILL_INFO"

// mapKillInfo is what the child writes.
type mapKillInfo struct {
	Sock, Remote, Local string
}

// TestMappedCopiesKillChild serves an agent for
// TestMappedCopiesNoResidue until it is killed.
func TestMappedCopiesKillChild(t *testing.T) {
	info := os.Getenv(mapKillEnv)
	if info == "" {
		t.Skip("run by TestMappedCopiesNoResidue")
	}
	h := mapKillCase.start(t, nil)
	b, err := json.Marshal(mapKillInfo{h.sock, h.remote, h.local})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(info+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(info+".tmp", info); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Second) // the parent kills it before
}

var mapKillCase = recordCase{"40KB mapped", 40 << 10, 200, 1 << 20, 0, true}

// TestMappedCopiesNoResidue: an agent process killed with SIGKILL while
// a client reads mapped copies leaves nothing in /dev/shm: its memory
// file has no name (the agent maps no file there), and the kernel frees
// it with the last mapping.
func TestMappedCopiesNoResidue(t *testing.T) {
	skipNoProc(t)
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	before := shmNames(t)
	dir := t.TempDir()
	info := filepath.Join(dir, "agent.json")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMappedCopiesKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), mapKillEnv+"="+info, "TMPDIR="+dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	var ki mapKillInfo
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the child agent did not start in 60 s")
		}
		b, err := os.ReadFile(info)
		if err == nil {
			if err := json.Unmarshal(b, &ki); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	h := &harness{t: t, sock: ki.Sock, remote: ki.Remote, local: ki.Local}
	_, total, _ := limitFor(t, h.remote, 0)
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	c := h.dial()
	r := mapKillCase.reader(t, c, begin(t, h, c, 2*total, "j", "", w), 16)
	r.untilMapped()
	// The agent's copies are in a memory file with no name.
	if l := procLines(t, pid, memfdTag); len(l) == 0 {
		t.Errorf("the agent maps no memory file of copies while the client reads them")
	}
	if l := procLines(t, pid, "/dev/shm/"); len(l) > 0 {
		t.Errorf("the agent maps files of /dev/shm: %q", l)
	}
	killed = true
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// Files of /dev/shm the agent made: those named after it or sluice
	// (other processes of the machine may make theirs meanwhile).
	var left []string
	for _, n := range shmNames(t) {
		if !slices.Contains(before, n) && (strings.Contains(n, "sluice") || strings.Contains(n, strconv.Itoa(pid))) {
			left = append(left, n)
		}
	}
	if len(left) > 0 {
		t.Errorf("left in /dev/shm by the killed agent: %v", left)
	}
}

// shmNames lists /dev/shm.
func shmNames(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.Name()
	}
	return out
}
