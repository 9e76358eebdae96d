package input

import (
	"context"
	"fmt"
)

// Item is one raw input record, as a Source reads it before decoding.
// Decoding (the CPU-heavy part) happens later, on any goroutine, with the
// Source's Decode method. Only the fields a Source uses are set.
type Item struct {
	// File names the input file, for error messages.
	File string
	// Pos is the record's position in File (a 1-based line or row number,
	// or a sample number), for error messages.
	Pos int64
	// Data is the raw record: a JSON line, an MDS record, a file path.
	Data []byte
	// Strs holds CSV cells.
	Strs []string
	// Aux carries source-specific data (a parquet row, a WebDataset sample).
	Aux any
	// Label is a class index (image folders).
	Label int64
}

// Loc formats the item's location as "file:pos".
func (it *Item) Loc() string { return fmt.Sprintf("%s:%d", it.File, it.Pos) }

// FieldFunc receives one decoded field. name may alias the item's bytes and
// is only valid during the call.
type FieldFunc func(name []byte, v Value) error

// Source is a sequence of input items in a deterministic order.
//
// Read is called from one goroutine; Decode may be called concurrently from
// many, on items Read returned.
type Source interface {
	// Columns returns the columns the source knows without looking at the
	// data (CSV headers, Parquet schemas, image folders, WebDataset fields
	// of the first sample, MDS indexes), or nil when the columns must be
	// inferred from decoded rows (JSON lines).
	Columns() []Column
	// Read appends up to max items to dst and returns it. It returns
	// io.EOF (with no items) at the end of the input.
	Read(ctx context.Context, dst []Item, max int) ([]Item, error)
	// Decode calls fn for each field of it, in a stable order.
	Decode(ctx context.Context, it *Item, fn FieldFunc) error
	// Close releases the source's files and connections.
	Close() error
}

// IOBound is implemented by sources whose Decode does I/O (reading each
// image of an image folder); the pipeline runs more decoders for them so
// that reads overlap.
type IOBound interface {
	// IOBound reports whether Decode does I/O.
	IOBound() bool
}
