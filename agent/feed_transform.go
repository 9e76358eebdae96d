package agent

import (
	"encoding/json"

	"github.com/sluicedata/sluice/agentapi"
)

// ColumnTransform changes one column of every sample of a feed batch
// before the agent writes it into the batch's shared memory: the client
// asks for it by name in its first feed request (agentapi.FeedNext
// Transforms), e.g. to receive an image column decoded and cropped.
//
// One ColumnTransform serves one iteration. Append is called from several
// goroutines at once, each for a different sample.
type ColumnTransform interface {
	// Out describes the column as the batch holds it: Kind FeedFixed with
	// DType and Shape (then every Append adds exactly dtype size × shape
	// bytes), or Kind FeedVar with the Encoding the client decodes the
	// bytes with (e.g. "bytes"). Name, offsets and sizes are the agent's.
	Out() agentapi.FeedColumn
	// Append appends the transformed value of one sample to dst and
	// returns it. src is the column's encoded value as stored in the
	// shard; it is valid only during the call.
	Append(dst, src []byte, s FeedSample) ([]byte, error)
}

// FeedSample identifies the sample a transform works on, so that random
// choices (a crop, a flip) can be drawn from a seed that depends on the
// sample and epoch only: a resumed run draws the same.
type FeedSample struct {
	// Sample is the global sample ID.
	Sample int64
	// Epoch is the iteration's epoch.
	Epoch int64
	// Seed is the epoch's shuffle seed (MosaicML's shuffle_seed).
	Seed int64
}

// TransformFactory builds a transform for one column of an iteration.
// col gives the column's name and stored encoding (Kind FeedFixed with
// Stride the stored size when the column is fixed-size), params the
// client's parameters. Errors wrapping agentapi.ErrInvalid reach the
// client as invalid-argument errors.
type TransformFactory func(col agentapi.FeedColumn, params json.RawMessage) (ColumnTransform, error)

// feedTransforms is the table of transforms a feed request may name.
func feedTransforms() map[string]TransformFactory {
	return map[string]TransformFactory{
		"image": newImageTransform, // agent/feed_image.go
	}
}
