package agentapi

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"
)

// feedFixture is a hand-laid batch of 3 samples: ids, a fixed int32
// column and a variable column.
func feedFixture() (FeedBatch, []byte) {
	mem := make([]byte, 256)
	for i, id := range []int64{7, 3, 9} {
		binary.LittleEndian.PutUint64(mem[8*i:], uint64(id))
		binary.LittleEndian.PutUint32(mem[64+4*i:], uint32(100+id))
	}
	offs := []uint64{0, 1, 1, 4}
	for i, o := range offs {
		binary.LittleEndian.PutUint64(mem[128+8*i:], o)
	}
	copy(mem[192:], "abcd")
	b := FeedBatch{Op: OpFeed, N: 3, Size: 256, Samples: 0, Columns: []FeedColumn{
		{Name: "x", Encoding: "int32", Kind: FeedFixed, DType: "int32", Offset: 64, Stride: 4, Size: 12},
		{Name: "s", Encoding: "str", Kind: FeedVar, Index: 128, Offset: 192, Size: 4},
	}}
	return b, mem
}

func TestParseFeed(t *testing.T) {
	b, mem := feedFixture()
	v, err := ParseFeed(b, mem)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"a", "", "bcd"} {
		if got := string(v.Value(1, i)); got != want {
			t.Fatalf("value %d: %q, want %q", i, got, want)
		}
		if got := int64(binary.LittleEndian.Uint32(v.Value(0, i))); got != 100+v.Sample(i) {
			t.Fatalf("value %d: %d for sample %d", i, got, v.Sample(i))
		}
	}
	bad := []func(*FeedBatch, []byte){
		func(b *FeedBatch, _ []byte) { b.Size = 255 },
		func(b *FeedBatch, _ []byte) { b.N = -1 },
		func(b *FeedBatch, _ []byte) { b.N = 4 },
		func(b *FeedBatch, _ []byte) { b.Samples = 250 },
		func(b *FeedBatch, _ []byte) { b.Columns[0].Stride = 8 },
		func(b *FeedBatch, _ []byte) { b.Columns[0].DType = "object" },
		func(b *FeedBatch, _ []byte) { b.Columns[0].Offset = 250 },
		func(b *FeedBatch, _ []byte) { b.Columns[0].Shape = []int64{-1} },
		func(b *FeedBatch, _ []byte) { b.Columns[0].Shape = []int64{1 << 62, 1 << 62} },
		func(b *FeedBatch, _ []byte) { b.Columns[1].Name = "x" },
		func(b *FeedBatch, _ []byte) { b.Columns[1].Kind = "other" },
		func(b *FeedBatch, _ []byte) { b.Columns[1].Size = 5 },
		func(b *FeedBatch, _ []byte) { b.Columns[1].Index = 240 },
		func(b *FeedBatch, m []byte) { binary.LittleEndian.PutUint64(m[136:], 9) },
		func(b *FeedBatch, m []byte) { binary.LittleEndian.PutUint64(m[128:], 1) },
		func(b *FeedBatch, _ []byte) { b.Columns[1].Offset = -1 },
	}
	for i, mut := range bad {
		b, mem := feedFixture()
		mut(&b, mem)
		if _, err := ParseFeed(b, mem); !errors.Is(err, ErrFrame) {
			t.Errorf("mutation %d: %v, want ErrFrame", i, err)
		}
	}
}

// FuzzParseFeed checks that ParseFeed never panics or reads outside the
// memory, and that every value of an accepted batch lies inside it.
func FuzzParseFeed(f *testing.F) {
	b, mem := feedFixture()
	h, _ := json.Marshal(b)
	f.Add(h, mem)
	f.Add([]byte(`{"n":1,"size":8,"samples":0,"columns":[{"name":"a","kind":"var","index":0,"offset":8,"size":0}]}`), make([]byte, 16))
	f.Fuzz(func(t *testing.T, header, mem []byte) {
		var b FeedBatch
		if json.Unmarshal(header, &b) != nil {
			return
		}
		v, err := ParseFeed(b, mem)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v is not ErrFrame", err)
			}
			return
		}
		var total int
		for i := range b.N {
			_ = v.Sample(i)
			for c := range b.Columns {
				total += len(v.Value(c, i))
			}
		}
		if total > len(mem)*len(b.Columns)+1 {
			t.Fatalf("values of %d bytes in %d", total, len(mem))
		}
	})
}
