package agentapi

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

// The feed: batches assembled by the agent in shared memory.
//
// A "feed" request asks for the next batch of an iteration's samples. The
// agent reads the samples, splits their records into columns and writes the
// batch into a fresh anonymous memory file (memfd_create), whose descriptor
// travels with the reply frame as SCM_RIGHTS ancillary data. The reply
// header (FeedBatch) tells where each column lies in that file:
//
//   - a fixed-size column holds N values of Stride bytes each, back to
//     back from Offset (collated: N × shape, ready to view as one array);
//   - a variable-size column holds N+1 little-endian uint64 offsets at
//     Index, relative to Offset, and the values' bytes from Offset.
//
// The sample IDs (N little-endian int64) lie at FeedBatch.Samples. Every
// region starts at a multiple of FeedAlign. Memory files are reused: a few
// slots per iteration, each written again only after the client frees it
// (so pages are allocated once, not per batch). They have no name; the
// agent's descriptors close with the connection and the client's mappings
// with its process, so a killed client or agent leaves no shared memory
// behind. No lease is held for a feed batch once it is written.

// FeedVersion is the first protocol version with the feed op.
const FeedVersion = 2

// OpFeed names the feed request and its reply.
const OpFeed = "feed"

// FeedAlign is the alignment of every region of a feed batch.
const FeedAlign = 64

// MaxFeedBatch bounds the bytes of one feed batch.
const MaxFeedBatch = 1 << 34

// Column kinds of a feed batch.
const (
	// FeedFixed marks a column whose values all have Stride bytes.
	FeedFixed = "fixed"
	// FeedVar marks a column of variable-size values.
	FeedVar = "var"
)

// FeedTransformSpec asks the agent to transform one column before it is
// written into the batch (for example, decode an image).
type FeedTransformSpec struct {
	// Column is the column's name.
	Column string `json:"column"`
	// Transform names a transform the agent knows.
	Transform string `json:"transform"`
	// Params are the transform's parameters, as it documents them.
	Params json.RawMessage `json:"params,omitempty"`
}

// FeedNext asks for the next batch of an iteration (op "feed").
type FeedNext struct {
	Op   string `json:"op"`
	Iter int    `json:"iter"`
	// Max is the batch size: a reply holds exactly Max samples, fewer
	// only at the end of the iteration.
	Max int `json:"max"`
	// WaitMS bounds how long the agent waits for the batch to fill before
	// it answers with an empty, not-done reply (0: the agent's default).
	// Samples taken meanwhile stay with the iteration for the next request.
	WaitMS int `json:"wait_ms,omitempty"`
	// Transforms apply from the iteration's first feed request on; the
	// agent ignores them on later requests.
	Transforms []FeedTransformSpec `json:"transforms,omitempty"`
	// Free lists slots (FeedBatch.Slot) the client no longer views: the
	// agent may write later batches into them.
	Free []int `json:"free,omitempty"`
}

// FeedColumn places one column in a feed batch.
type FeedColumn struct {
	// Name is the column's name.
	Name string `json:"name"`
	// Encoding is the column's encoding (the schema's, or what its
	// transform produced, e.g. "ndarray:uint8:224,224,3").
	Encoding string `json:"encoding"`
	// Kind is FeedFixed or FeedVar.
	Kind string `json:"kind"`
	// DType is the numpy dtype name of a fixed column's elements ("int32",
	// "uint8", ...); empty for variable columns.
	DType string `json:"dtype,omitempty"`
	// Shape is the shape of one value of a fixed column (empty: a scalar).
	Shape []int64 `json:"shape,omitempty"`
	// Offset is where the column's values start.
	Offset int64 `json:"offset"`
	// Stride is a fixed column's bytes per value.
	Stride int64 `json:"stride,omitempty"`
	// Index is where a variable column's N+1 offsets lie.
	Index int64 `json:"index,omitempty"`
	// Size is the bytes of the column's values (N × Stride when fixed).
	Size int64 `json:"size"`
}

// FeedBatch is the header of a feed reply; its memory file comes as
// ancillary data when N > 0.
type FeedBatch struct {
	Op string `json:"op"`
	// N is the number of samples.
	N int `json:"n"`
	// Done reports the end of the iteration (N is then 0).
	Done bool `json:"done"`
	// Slot names the memory file the batch lies in, from offset 0. The
	// agent keeps a few per iteration and writes a later batch into a slot
	// only once the client has listed it in FeedNext.Free; a slot's
	// descriptor comes with the first batch written into it (and with
	// every batch of slot 0, a file used once).
	Slot int `json:"slot"`
	// Retired lists slots the agent has closed: the client unmaps them.
	Retired []int `json:"retired,omitempty"`
	// Size is the batch's size in bytes (its slot's file may be larger).
	Size int64 `json:"size"`
	// Samples is where the N sample IDs lie.
	Samples int64 `json:"samples"`
	// Columns are the columns in schema order.
	Columns []FeedColumn `json:"columns"`
}

// feedDTypeSize gives the element size of the dtypes a fixed column may
// have.
var feedDTypeSize = map[string]int64{
	"int8": 1, "int16": 2, "int32": 4, "int64": 8,
	"uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
	"float16": 2, "float32": 4, "float64": 8,
}

// FeedDTypeSize returns the element size of a fixed column's dtype, or
// false for a dtype a feed batch cannot hold.
func FeedDTypeSize(dtype string) (int64, bool) {
	n, ok := feedDTypeSize[dtype]
	return n, ok
}

// FeedView is a checked feed batch over its memory.
type FeedView struct {
	Batch FeedBatch
	mem   []byte
}

// ParseFeed checks a feed batch header against its memory (the mapped
// file): every region lies inside mem, fixed columns are N × Stride bytes
// with Stride = dtype size × shape, variable columns' offsets ascend from
// 0 to Size. It never reads outside mem whatever the header claims.
func ParseFeed(b FeedBatch, mem []byte) (*FeedView, error) {
	if b.N < 0 || int64(b.N) > int64(len(mem))/8+1 {
		return nil, fmt.Errorf("%w: feed batch of %d samples", ErrFrame, b.N)
	}
	if b.Size != int64(len(mem)) {
		return nil, fmt.Errorf("%w: feed batch announces %d bytes, its memory has %d", ErrFrame, b.Size, len(mem))
	}
	n := int64(b.N)
	if err := inside(mem, b.Samples, 8*n, "sample ids"); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, c := range b.Columns {
		if seen[c.Name] {
			return nil, fmt.Errorf("%w: feed column %d: name %q repeats", ErrFrame, i, c.Name)
		}
		seen[c.Name] = true
		switch c.Kind {
		case FeedFixed:
			es, ok := FeedDTypeSize(c.DType)
			if !ok {
				return nil, fmt.Errorf("%w: feed column %q: dtype %q", ErrFrame, c.Name, c.DType)
			}
			stride := es
			for _, d := range c.Shape {
				if d < 0 || (d > 0 && stride > math.MaxInt64/d) {
					return nil, fmt.Errorf("%w: feed column %q: shape %v", ErrFrame, c.Name, c.Shape)
				}
				stride *= d
			}
			if stride != c.Stride {
				return nil, fmt.Errorf("%w: feed column %q: stride %d, dtype %s × shape %v is %d", ErrFrame, c.Name, c.Stride, c.DType, c.Shape, stride)
			}
			if n > 0 && stride > math.MaxInt64/n || stride*n != c.Size {
				return nil, fmt.Errorf("%w: feed column %q: %d bytes for %d values of %d", ErrFrame, c.Name, c.Size, n, stride)
			}
			if err := inside(mem, c.Offset, c.Size, c.Name); err != nil {
				return nil, err
			}
		case FeedVar:
			if err := inside(mem, c.Index, 8*(n+1), c.Name+" offsets"); err != nil {
				return nil, err
			}
			if err := inside(mem, c.Offset, c.Size, c.Name); err != nil {
				return nil, err
			}
			var prev uint64
			for j := int64(0); j <= n; j++ {
				o := binary.LittleEndian.Uint64(mem[c.Index+8*j:])
				if (j == 0 && o != 0) || o < prev || (j == n && o != uint64(c.Size)) {
					return nil, fmt.Errorf("%w: feed column %q: offset %d of value %d out of order (size %d)", ErrFrame, c.Name, o, j, c.Size)
				}
				prev = o
			}
		default:
			return nil, fmt.Errorf("%w: feed column %q: kind %q", ErrFrame, c.Name, c.Kind)
		}
	}
	return &FeedView{Batch: b, mem: mem}, nil
}

func inside(mem []byte, off, n int64, what string) error {
	if off < 0 || n < 0 || off > int64(len(mem)) || n > int64(len(mem))-off {
		return fmt.Errorf("%w: feed region %s [%d, +%d) outside the batch's %d bytes", ErrFrame, what, off, n, len(mem))
	}
	return nil
}

// Sample returns the global ID of sample i (0 <= i < N).
func (v *FeedView) Sample(i int) int64 {
	return int64(binary.LittleEndian.Uint64(v.mem[v.Batch.Samples+8*int64(i):]))
}

// Value returns the bytes of column c's value for sample i (aliasing the
// batch memory).
func (v *FeedView) Value(c, i int) []byte {
	col := v.Batch.Columns[c]
	if col.Kind == FeedFixed {
		s := col.Offset + col.Stride*int64(i)
		return v.mem[s : s+col.Stride : s+col.Stride]
	}
	a := binary.LittleEndian.Uint64(v.mem[col.Index+8*int64(i):])
	b := binary.LittleEndian.Uint64(v.mem[col.Index+8*int64(i+1):])
	s := col.Offset + int64(a)
	e := col.Offset + int64(b)
	return v.mem[s:e:e]
}
