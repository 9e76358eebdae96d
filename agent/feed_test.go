package agent

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
)

// feedClient speaks the feed protocol over a raw unix connection.
type feedClient struct {
	t     *testing.T
	uc    *net.UnixConn
	slots map[int][]byte // mapped slots
	free  []int          // slots to free with the next request
	fds   int            // descriptors received
}

func dialFeed(t *testing.T, sock string) *feedClient {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	fc := &feedClient{t: t, uc: nc.(*net.UnixConn), slots: map[int][]byte{}}
	t.Cleanup(func() {
		for _, m := range fc.slots {
			unix.Munmap(m)
		}
	})
	var h agentapi.Hello
	fc.call(agentapi.Hello{Op: agentapi.OpHello, Version: agentapi.Version, MinVersion: agentapi.MinVersion}, &h)
	if h.Version != agentapi.FeedVersion {
		t.Fatalf("hello settled on version %d", h.Version)
	}
	return fc
}

func (fc *feedClient) send(req any) {
	fc.t.Helper()
	b, err := agentapi.AppendFrame(nil, req, nil)
	if err != nil {
		fc.t.Fatal(err)
	}
	if _, err := fc.uc.Write(b); err != nil {
		fc.t.Fatal(err)
	}
}

// recv reads one reply and the descriptors that came with it.
func (fc *feedClient) recv(out any) []int {
	fc.t.Helper()
	head := make([]byte, 8)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := fc.uc.ReadMsgUnix(head, oob)
	if err != nil {
		fc.t.Fatal(err)
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			fc.t.Fatal(err)
		}
		for _, m := range msgs {
			got, err := unix.ParseUnixRights(&m)
			if err != nil {
				fc.t.Fatal(err)
			}
			fds = append(fds, got...)
		}
	}
	if _, err := io.ReadFull(fc.uc, head[n:]); err != nil {
		fc.t.Fatal(err)
	}
	total := binary.LittleEndian.Uint32(head)
	rest := make([]byte, total-4)
	if _, err := io.ReadFull(fc.uc, rest); err != nil {
		fc.t.Fatal(err)
	}
	f, _, err := agentapi.ParseFrame(append(head, rest...))
	if err != nil {
		fc.t.Fatal(err)
	}
	var e agentapi.Error
	if json.Unmarshal(f.Header, &e) == nil && e.Op == agentapi.OpError {
		for _, fd := range fds {
			unix.Close(fd)
		}
		fc.t.Fatalf("agent error: %v", &e)
	}
	if err := json.Unmarshal(f.Header, out); err != nil {
		fc.t.Fatal(err)
	}
	return fds
}

func (fc *feedClient) call(req, out any) {
	fc.t.Helper()
	fc.send(req)
	if fds := fc.recv(out); len(fds) > 0 {
		fc.t.Fatalf("reply to %T came with %d descriptors", req, len(fds))
	}
}

// next fetches one feed batch and maps it; done frees its slot.
func (fc *feedClient) next(iter, max int) (*agentapi.FeedView, func()) {
	fc.t.Helper()
	fc.send(agentapi.FeedNext{Op: agentapi.OpFeed, Iter: iter, Max: max, Free: fc.free})
	fc.free = nil
	var b agentapi.FeedBatch
	fds := fc.recv(&b)
	fc.fds += len(fds)
	for _, r := range b.Retired {
		unix.Munmap(fc.slots[r])
		delete(fc.slots, r)
	}
	if b.N == 0 {
		if len(fds) != 0 {
			fc.t.Fatalf("empty batch came with %d descriptors", len(fds))
		}
		return &agentapi.FeedView{Batch: b}, func() {}
	}
	mem, ok := fc.slots[b.Slot]
	if len(fds) == 1 {
		var st unix.Stat_t
		if err := unix.Fstat(fds[0], &st); err != nil {
			fc.t.Fatal(err)
		}
		m, err := unix.Mmap(fds[0], 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
		unix.Close(fds[0])
		if err != nil {
			fc.t.Fatal(err)
		}
		if ok {
			fc.t.Fatalf("slot %d sent twice", b.Slot)
		}
		mem = m
		if b.Slot != 0 {
			fc.slots[b.Slot] = m
		}
	} else if len(fds) != 0 || !ok {
		fc.t.Fatalf("batch of %d in slot %d came with %d descriptors (mapped: %v)", b.N, b.Slot, len(fds), ok)
	}
	if b.Size > int64(len(mem)) {
		fc.t.Fatalf("batch of %d bytes in a slot of %d", b.Size, len(mem))
	}
	v, err := agentapi.ParseFeed(b, mem[:b.Size])
	if err != nil {
		fc.t.Fatal(err)
	}
	return v, func() {
		if b.Slot != 0 {
			fc.free = append(fc.free, b.Slot)
		} else {
			unix.Munmap(mem)
		}
	}
}

// memfds counts this process's descriptors that are memory files.
func memfds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, "/memfd:") {
			n++
		}
	}
	return n
}

// TestFeedMatchesPlan feeds every worker's iteration in batches and checks
// the order against the plan, each id and text column against its sample,
// the batch sizes, and that the agent keeps no memory file or lease.
func TestFeedMatchesPlan(t *testing.T) {
	h := startAgent(t, 300, nil)
	fc := dialFeed(t, h.sock)
	before := memfds(t)
	const workers, bs = 2, 7
	for w := range workers {
		world := agentapi.World{Worker: w, NumWorkers: workers}
		var op agentapi.Opened
		fc.call(agentapi.Open{Op: agentapi.OpOpen, Dataset: h.dataset(), Job: "feed", World: world}, &op)
		var bg agentapi.Begun
		fc.call(agentapi.Begin{Op: agentapi.OpBegin, Handle: op.Handle, World: world}, &bg)
		var ids []int64
		for {
			v, done := fc.next(bg.Iter, bs)
			b := v.Batch
			if b.Done {
				done()
				break
			}
			if b.N == 0 {
				done()
				continue
			}
			if len(b.Columns) != 2 || b.Columns[0].Name != "id" || b.Columns[0].Kind != agentapi.FeedFixed || b.Columns[0].DType != "int64" ||
				b.Columns[1].Name != "text" || b.Columns[1].Kind != agentapi.FeedVar {
				t.Fatalf("columns %+v", b.Columns)
			}
			for i := range b.N {
				id := v.Sample(i)
				if got := int64(binary.LittleEndian.Uint64(v.Value(0, i))); got != id {
					t.Fatalf("sample %d: id column %d", id, got)
				}
				if got, want := string(v.Value(1, i)), fmt.Sprintf("sample %d", id); got != want {
					t.Fatalf("sample %d: text %q, want %q", id, got, want)
				}
				ids = append(ids, id)
			}
			if b.N != bs && len(ids)%bs != b.N {
				t.Fatalf("short batch of %d before the end", b.N)
			}
			done()
		}
		want := planIDs(t, h, 1, world)[0]
		if !slices.Equal(ids, want) {
			t.Fatalf("worker %d: fed %d samples %v..., plan %d %v...", w, len(ids), ids[:min(8, len(ids))], len(want), want[:min(8, len(want))])
		}
		// The iteration's slots close with it.
		fc.call(agentapi.End{Op: agentapi.OpEnd, Iter: bg.Iter}, &agentapi.OK{})
		if got := memfds(t); got != before {
			t.Fatalf("%d memory files open in the agent's process after the iteration ended (before %d)", got, before)
		}
	}
	// Freed slots are reused: far fewer files than batches.
	if fc.fds == 0 || fc.fds > 2*workers {
		t.Fatalf("%d memory files received for 300 samples in batches of %d", fc.fds, bs)
	}
	st := h.a.stats()
	if st.Leases != 0 {
		t.Fatalf("agent holds %d leases after the feed", st.Leases)
	}
}

// TestFeedNeedsVersion2 refuses feed on a version-1 connection.
func TestFeedNeedsVersion2(t *testing.T) {
	h := startAgent(t, 10, nil)
	nc, err := net.Dial("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fc := &feedClient{t: t, uc: nc.(*net.UnixConn)}
	var hello agentapi.Hello
	fc.call(agentapi.Hello{Op: agentapi.OpHello, Version: 1, MinVersion: 1}, &hello)
	if hello.Version != 1 {
		t.Fatalf("version %d", hello.Version)
	}
	fc.send(agentapi.FeedNext{Op: agentapi.OpFeed, Iter: 1, Max: 4})
	b := make([]byte, 1<<16)
	f, _, err := agentapi.ReadFrame(nc, b)
	if err != nil {
		t.Fatal(err)
	}
	var e agentapi.Error
	if err := json.Unmarshal(f.Header, &e); err != nil || e.Code != agentapi.CodeBadRequest || !strings.Contains(e.Message, "version") {
		t.Fatalf("reply %s", f.Header)
	}
}

// upper is a test transform: the column's bytes upper-cased (variable),
// or a fixed 4-byte value holding the sample ID xor the epoch's seed.
type upper struct{ fixed bool }

func (u upper) Out() agentapi.FeedColumn {
	if u.fixed {
		return agentapi.FeedColumn{Kind: agentapi.FeedFixed, DType: "uint32", Encoding: "uint32"}
	}
	return agentapi.FeedColumn{Kind: agentapi.FeedVar, Encoding: "str"}
}

func (u upper) Append(dst, src []byte, s FeedSample) ([]byte, error) {
	if string(src) == "sample 13" {
		return nil, fmt.Errorf("%w: thirteen", agentapi.ErrInvalid)
	}
	if u.fixed {
		return binary.LittleEndian.AppendUint32(dst, uint32(s.Sample)^uint32(s.Seed)), nil
	}
	return append(dst, strings.ToUpper(string(src))...), nil
}

// TestFeedTransforms runs transforms through an iteration's assembly:
// variable and fixed outputs, the seed they are given, and their errors.
func TestFeedTransforms(t *testing.T) {
	h := startAgent(t, 40, nil)
	ds := agentapi.Dataset{Remote: h.remote, Local: h.local, BatchSize: 4}
	table := map[string]TransformFactory{
		"upper": func(col agentapi.FeedColumn, _ json.RawMessage) (ColumnTransform, error) { return upper{}, nil },
		"key": func(col agentapi.FeedColumn, _ json.RawMessage) (ColumnTransform, error) {
			if col.Kind != agentapi.FeedFixed || col.Stride != 8 {
				return nil, fmt.Errorf("column %+v", col)
			}
			return upper{fixed: true}, nil
		},
	}
	sd, err := h.a.acquireDataset(t.Context(), "transforms", ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.a.releaseDataset(sd)
	fi := &feedIter{ds: sd, sample: FeedSample{Epoch: 0, Seed: 77}}
	bad := []agentapi.FeedTransformSpec{{Column: "text", Transform: "nope"}}
	if err := fi.configure(bad, table); !errors.Is(err, agentapi.ErrInvalid) {
		t.Fatalf("unknown transform: %v", err)
	}
	fi = &feedIter{ds: sd, sample: FeedSample{Epoch: 0, Seed: 77}}
	defer fi.close()
	specs := []agentapi.FeedTransformSpec{{Column: "text", Transform: "upper"}, {Column: "id", Transform: "key"}}
	if err := fi.configure(specs, table); err != nil {
		t.Fatal(err)
	}
	ep, err := sd.ds.NewEpoch(t.Context(), planWorld(agentapi.World{}, 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := startIteration(ep, 0, 0, iterShards{sizes: sd.shardBytes, schemas: sd.shardSchema}, 0, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.stop()
	locs, _, err := it.take(t.Context(), 10, agentTestWait)
	if err != nil || len(locs) == 0 {
		t.Fatalf("take: %d, %v", len(locs), err)
	}
	hdr, fd, err := fi.assemble(locs, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, int(hdr.Size), unix.PROT_READ, unix.MAP_SHARED)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	v, err := agentapi.ParseFeed(hdr, mem)
	if err != nil {
		t.Fatal(err)
	}
	if c := hdr.Columns[0]; c.Name != "id" || c.Kind != agentapi.FeedFixed || c.DType != "uint32" || c.Stride != 4 {
		t.Fatalf("id column %+v", c)
	}
	for i := range hdr.N {
		id := v.Sample(i)
		if got := binary.LittleEndian.Uint32(v.Value(0, i)); got != uint32(id)^77 {
			t.Fatalf("sample %d: key %d", id, got)
		}
		if got, want := string(v.Value(1, i)), fmt.Sprintf("SAMPLE %d", id); got != want {
			t.Fatalf("sample %d: %q, want %q", id, got, want)
		}
	}
	// Sample 13's transform fails: the batch fails, naming it.
	var with13 []location
	for {
		more, done, err := it.take(t.Context(), 40, agentTestWait)
		if err != nil {
			t.Fatal(err)
		}
		with13 = append(with13, more...)
		if done || len(more) == 0 {
			break
		}
	}
	defer releaseLocs(with13)
	releaseLocs(locs)
	if !slices.ContainsFunc(with13, func(l location) bool { return l.sample == 13 }) {
		t.Fatalf("sample 13 not in the rest of the epoch")
	}
	_, _, err = fi.assemble(with13, nil)
	if !errors.Is(err, agentapi.ErrInvalid) || !strings.Contains(err.Error(), "sample 13") {
		t.Fatalf("failing transform: %v", err)
	}
}

const agentTestWait = 5 * time.Second

// TestFeedLargeRecords feeds 40 KB values, which the agent reads from the
// shard straight into the batch (the direct path), next to small columns
// read through scratch, and checks every byte.
func TestFeedLargeRecords(t *testing.T) {
	h := startAgent(t, 1, nil)
	remote := filepath.Join(t.TempDir(), "large")
	w, err := mds.NewWriter(remote, &mds.WriterOptions{Columns: map[string]string{"id": "int", "blob": "bytes", "tag": "str"}, SizeLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	for i := range n {
		if err := w.Write(format.Sample{"id": int64(i), "blob": bytes.Repeat([]byte{byte(i)}, 40<<10+i), "tag": fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	fc := dialFeed(t, h.sock)
	var op agentapi.Opened
	fc.call(agentapi.Open{Op: agentapi.OpOpen, Dataset: agentapi.Dataset{Remote: remote, Local: filepath.Join(t.TempDir(), "c"), BatchSize: 8, Shuffle: true}, Job: "large"}, &op)
	var bg agentapi.Begun
	fc.call(agentapi.Begin{Op: agentapi.OpBegin, Handle: op.Handle}, &bg)
	seen := map[int64]bool{}
	for {
		v, done := fc.next(bg.Iter, 8)
		if v.Batch.Done {
			break
		}
		cols := map[string]int{}
		for k, c := range v.Batch.Columns {
			cols[c.Name] = k
		}
		for i := range v.Batch.N {
			id := v.Sample(i)
			if got := int64(binary.LittleEndian.Uint64(v.Value(cols["id"], i))); got != id {
				t.Fatalf("sample %d: id %d", id, got)
			}
			if got := v.Value(cols["blob"], i); !bytes.Equal(got, bytes.Repeat([]byte{byte(id)}, 40<<10+int(id))) {
				t.Fatalf("sample %d: blob of %d bytes differs", id, len(got))
			}
			if got := string(v.Value(cols["tag"], i)); got != fmt.Sprint("t", id) {
				t.Fatalf("sample %d: tag %q", id, got)
			}
			seen[id] = true
		}
		done()
	}
	if len(seen) != n {
		t.Fatalf("%d distinct samples, want %d", len(seen), n)
	}
}
