package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicedata/sluice/agentapi"
)

func ptr(n int64) *int64 { return &n }

func TestPlanFeedSchema(t *testing.T) {
	s := agentapi.Schema{Format: "mds",
		ColumnNames:     []string{"a", "b", "c", "d", "e", "f", "g"},
		ColumnEncodings: []string{"int", "float32", "ndarray:uint8:2,3", "ndarray:int16", "str", "bytes", "ndarray:int32:5"},
		ColumnSizes:     []*int64{ptr(8), ptr(4), ptr(6), nil, nil, nil, ptr(7)}}
	fs, err := planFeedSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		kind, dtype string
		shape       []int64
		stride      int64
	}
	wants := []want{
		{agentapi.FeedFixed, "int64", nil, 8},
		{agentapi.FeedFixed, "float32", nil, 4},
		{agentapi.FeedFixed, "uint8", []int64{2, 3}, 6},
		{agentapi.FeedVar, "", nil, 0},
		{agentapi.FeedVar, "", nil, 0},
		{agentapi.FeedVar, "", nil, 0},
		// The stored size disagrees with the encoding: not collated.
		{agentapi.FeedVar, "", nil, 0},
	}
	for i, w := range wants {
		o := fs.cols[i].out
		if o.Kind != w.kind || o.DType != w.dtype || !slices.Equal(o.Shape, w.shape) || o.Stride != w.stride || o.Name != s.ColumnNames[i] || o.Encoding != s.ColumnEncodings[i] {
			t.Errorf("column %d: %+v, want %+v", i, o, w)
		}
	}
	if fs.nvar != 3 {
		t.Fatalf("nvar %d", fs.nvar)
	}
	if _, err := planFeedSchema(agentapi.Schema{Format: "json"}); err == nil {
		t.Fatal("json schema planned")
	}
}

// TestLayoutFeedRoundTrip lays out a batch, writes it into a memory file
// and reads every value back through ParseFeed.
func TestLayoutFeedRoundTrip(t *testing.T) {
	s := agentapi.Schema{Format: "mds", ColumnNames: []string{"t", "id", "v"},
		ColumnEncodings: []string{"str", "int", "ndarray:uint8:3"}, ColumnSizes: []*int64{nil, ptr(8), ptr(3)}}
	fs, err := planFeedSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"", "x", "hello world", "z"}
	var ids []int64
	var values [][][]byte
	for i, txt := range texts {
		rec := binary.LittleEndian.AppendUint32(nil, uint32(len(txt)))
		rec = append(rec, txt...)
		rec = binary.LittleEndian.AppendUint64(rec, uint64(1000+i))
		rec = append(rec, byte(i), byte(i+1), byte(i+2))
		v, err := fs.split(rec, nil)
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, v)
		ids = append(ids, int64(50+i))
	}
	if _, err := fs.split([]byte{9, 0, 0, 0, 'a'}, nil); !errors.Is(err, agentapi.ErrCorrupt) {
		t.Fatalf("short record: %v", err)
	}
	if _, err := fs.split([]byte{1}, nil); !errors.Is(err, agentapi.ErrCorrupt) {
		t.Fatalf("truncated lengths: %v", err)
	}
	cols := []agentapi.FeedColumn{fs.cols[0].out, fs.cols[1].out, fs.cols[2].out}
	hdr, pieces, _, err := layoutFeed(cols, ids, values, nil)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := writeMemfd(hdr.Size, pieces, nil, len(cols))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	mem := make([]byte, hdr.Size)
	if _, err := unix.Pread(fd, mem, 0); err != nil {
		t.Fatal(err)
	}
	v, err := agentapi.ParseFeed(hdr, mem)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range hdr.Columns {
		if c.Offset%agentapi.FeedAlign != 0 || c.Index%agentapi.FeedAlign != 0 {
			t.Fatalf("column %q not aligned: %+v", c.Name, c)
		}
	}
	for i, txt := range texts {
		if v.Sample(i) != ids[i] || string(v.Value(0, i)) != txt ||
			binary.LittleEndian.Uint64(v.Value(1, i)) != uint64(1000+i) || !bytes.Equal(v.Value(2, i), []byte{byte(i), byte(i + 1), byte(i + 2)}) {
			t.Fatalf("sample %d read back wrong", i)
		}
	}
	// The fixed column is collated: one run of N × stride bytes.
	c := hdr.Columns[2]
	if got := mem[c.Offset : c.Offset+c.Size]; !bytes.Equal(got, []byte{0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5}) {
		t.Fatalf("collated column %v", got)
	}
	// A fixed value of the wrong size is refused.
	values[1][2] = values[1][2][:2]
	if _, _, _, err := layoutFeed(cols, ids, values, nil); !errors.Is(err, agentapi.ErrCorrupt) {
		t.Fatalf("short fixed value: %v", err)
	}
}

// BenchmarkFeedAssemble measures laying out and writing a batch of 32
// samples of 100 KB bytes plus an int column into a memory file.
func BenchmarkFeedAssemble(b *testing.B) {
	cols := []agentapi.FeedColumn{{Name: "id", Kind: agentapi.FeedFixed, DType: "int64", Stride: 8}, {Name: "data", Kind: agentapi.FeedVar}}
	const n = 32
	ids := make([]int64, n)
	values := make([][][]byte, n)
	payload := bytes.Repeat([]byte{7}, 100<<10)
	for i := range values {
		ids[i] = int64(i)
		values[i] = [][]byte{binary.LittleEndian.AppendUint64(nil, uint64(i)), payload}
	}
	b.SetBytes(n * (100<<10 + 8))
	var meta []byte
	for b.Loop() {
		hdr, pieces, m, err := layoutFeed(cols, ids, values, meta)
		if err != nil {
			b.Fatal(err)
		}
		meta = m
		fd, err := writeMemfd(hdr.Size, pieces, nil, len(cols))
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
}

// BenchmarkFeedSlot is the steady state: the same batch laid out and
// written into a reused, mapped slot (no page allocation).
func BenchmarkFeedSlot(b *testing.B) {
	cols := []agentapi.FeedColumn{{Name: "id", Kind: agentapi.FeedFixed, DType: "int64", Stride: 8}, {Name: "x", Kind: agentapi.FeedFixed, DType: "float32", Shape: []int64{3, 64, 64}, Stride: 4 * 3 * 64 * 64}}
	const n = 32
	ids := make([]int64, n)
	values := make([][][]byte, n)
	payload := bytes.Repeat([]byte{7}, 4*3*64*64)
	for i := range values {
		ids[i] = int64(i)
		values[i] = [][]byte{binary.LittleEndian.AppendUint64(nil, uint64(i)), payload}
	}
	fi := &feedIter{}
	defer fi.close()
	b.SetBytes(n * int64(len(payload)+8))
	var meta []byte
	for b.Loop() {
		hdr, pieces, m, err := layoutFeed(cols, ids, values, meta)
		if err != nil {
			b.Fatal(err)
		}
		meta = m
		sl, err := fi.slotFor(hdr.Size)
		if err != nil || sl == nil {
			b.Fatal(err)
		}
		if err := fillFeed(sl.mem, pieces, nil, len(cols)); err != nil {
			b.Fatal(err)
		}
	}
}
