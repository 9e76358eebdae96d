package agent

import (
	"context"

	"github.com/sluicedata/sluice/agentapi"
)

// location is one sample's place in the node cache. Its shard stays leased
// until release is called.
type location struct {
	sample int64
	shard  int
	path   string // absolute path of the raw, uncompressed shard file
	size   int64  // size of that file in bytes
	offset int64  // of the sample's record in the file
	length int64  // of the record
	// release drops the lease; it must be called exactly once.
	release func()
}

// iterSpec says which slice of which epoch an iteration yields.
type iterSpec struct {
	world agentapi.World
	// resume, when non-nil, is the state to start from: its epoch and
	// sample_in_epoch, and the order parameters it carries.
	resume *agentapi.State
	// epoch is the epoch to iterate when resume is nil.
	epoch int64
	// skip drops this many of the worker's own samples first.
	skip int64
}

// iterStart reports where an iteration begins and which order parameters it
// uses.
type iterStart struct {
	epoch                int64
	sampleInEpoch        int64
	numCanonicalNodes    int
	shuffleSeed          int64
	initialPhysicalNodes int64
}

// source is an opened dataset as the agent serves it: the stream package's
// Dataset on the shared node cache.
type source interface {
	// info describes the dataset for a consumer placed at w.
	info(w agentapi.World) (agentapi.Opened, error)
	// iterate starts an iteration of sample locations.
	iterate(ctx context.Context, spec iterSpec) (locIterator, iterStart, error)
	// get returns the location of one sample by global index.
	get(ctx context.Context, index int64) (location, error)
	// close releases the dataset.
	close() error
}

// locIterator yields the locations of one iteration in plan order.
type locIterator interface {
	// next returns the next location, io.EOF at the end of the slice.
	next(ctx context.Context) (location, error)
	// close stops the iteration; locations already returned stay leased
	// until released.
	close() error
}

// opener opens a dataset from its wire description.
type opener func(ctx context.Context, ds agentapi.Dataset) (source, error)
