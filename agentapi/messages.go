package agentapi

import (
	"encoding/binary"
	"fmt"
)

// Protocol versions. The hello exchange settles on the highest version both
// sides support; a client older than MinVersion is refused.
const (
	// Version is the protocol version this package speaks.
	//
	//	1: hello, open, begin, next, release, end, get, epoch, stats.
	//	2: feed (batches in shared memory, see feed.go).
	Version = 2
	// MinVersion is the oldest version an agent still accepts.
	MinVersion = 1
)

// Operation names, the "op" field of every header.
const (
	OpHello   = "hello"
	OpOpen    = "open"
	OpBegin   = "begin"
	OpNext    = "next"
	OpRelease = "release"
	OpEnd     = "end"
	OpGet     = "get"
	OpEpoch   = "epoch"
	OpStats   = "stats"
	OpOK      = "ok"
	OpBatch   = "batch"
	OpError   = "error"
)

// InlineFlag marks, in an entry's shard ref, a record carried in the batch
// body instead of read from the shard file. The low bits still index
// Batch.Shards, which tells the record's schema.
const InlineFlag = 1 << 31

// EntrySize is the size in bytes of one batch entry.
const EntrySize = 24

// Hello opens a connection (client → agent) and answers it (agent → client).
type Hello struct {
	Op string `json:"op"`
	// Version is the highest protocol version the sender speaks.
	Version int `json:"version"`
	// MinVersion is the lowest protocol version the sender accepts.
	MinVersion int `json:"min_version"`
	// Software names the sender, e.g. "sluice-python/0.1".
	Software string `json:"software,omitempty"`
	// PID is the sender's process ID.
	PID int `json:"pid,omitempty"`
	// Features lists what the agent's build offers beyond its protocol
	// version (agent → client; see the Feature constants). A client
	// ignores names it does not know, and an agent that sends none is
	// one of an older release: its image decoder is unknown.
	Features []string `json:"features,omitempty"`
}

// Feature names an agent announces in its hello reply.
const (
	// FeatureImageGo: the agent's "image" feed transform decodes with
	// the pure-Go decoders (the default, static build).
	FeatureImageGo = "image-decoder:go"
	// FeatureImageLibjpeg: the agent's "image" feed transform decodes
	// JPEGs with libjpeg-turbo (a `-tags libjpeg` build).
	FeatureImageLibjpeg = "image-decoder:libjpeg-turbo"
	// FeatureOrderAdmissions: the agent honours Dataset.OrderAdmissions.
	FeatureOrderAdmissions = "order-admissions"
)

// HasFeature reports whether h announces feature f.
func (h *Hello) HasFeature(f string) bool {
	for _, g := range h.Features {
		if g == f {
			return true
		}
	}
	return false
}

// Stream is one source of a dataset, with MosaicML's Stream arguments.
// Nil and zero fields take the dataset's defaults.
type Stream struct {
	Remote          string   `json:"remote,omitempty"`
	Local           string   `json:"local,omitempty"`
	Split           string   `json:"split,omitempty"`
	Proportion      *float64 `json:"proportion,omitempty"`
	Repeat          *float64 `json:"repeat,omitempty"`
	Choose          *int64   `json:"choose,omitempty"`
	DownloadRetry   *int     `json:"download_retry,omitempty"`
	DownloadTimeout *float64 `json:"download_timeout,omitempty"`
	ValidateHash    string   `json:"validate_hash,omitempty"`
	KeepZip         *bool    `json:"keep_zip,omitempty"`
}

// Dataset holds MosaicML StreamingDataset arguments under their Python
// names. Nil and zero fields mean MosaicML's defaults. Sizes (epoch_size,
// cache_limit) are strings so that "100k" and "10gb" cross unchanged.
type Dataset struct {
	Remote              string   `json:"remote,omitempty"`
	Local               string   `json:"local,omitempty"`
	Split               string   `json:"split,omitempty"`
	Streams             []Stream `json:"streams,omitempty"`
	DownloadRetry       *int     `json:"download_retry,omitempty"`
	DownloadTimeout     *float64 `json:"download_timeout,omitempty"`
	ValidateHash        string   `json:"validate_hash,omitempty"`
	KeepZip             bool     `json:"keep_zip,omitempty"`
	EpochSize           string   `json:"epoch_size,omitempty"`
	Predownload         *int     `json:"predownload,omitempty"`
	CacheLimit          string   `json:"cache_limit,omitempty"`
	SamplingMethod      string   `json:"sampling_method,omitempty"`
	SamplingGranularity int64    `json:"sampling_granularity,omitempty"`
	PartitionAlgo       string   `json:"partition_algo,omitempty"`
	NumCanonicalNodes   int      `json:"num_canonical_nodes,omitempty"`
	BatchSize           int      `json:"batch_size,omitempty"`
	Shuffle             bool     `json:"shuffle,omitempty"`
	ShuffleAlgo         string   `json:"shuffle_algo,omitempty"`
	ShuffleSeed         *int64   `json:"shuffle_seed,omitempty"`
	ShuffleBlockSize    int64    `json:"shuffle_block_size,omitempty"`
	BatchingMethod      string   `json:"batching_method,omitempty"`
	AllowUnsafeTypes    bool     `json:"allow_unsafe_types,omitempty"`
	Replication         int      `json:"replication,omitempty"`
	// OrderAdmissions makes the DataLoader workers of a rank take their
	// shard changes in turn under a cache limit (stream.Options'
	// OrderAdmissions; agents that announce FeatureOrderAdmissions). An
	// agent of an older release ignores it.
	OrderAdmissions bool `json:"order_admissions,omitempty"`
}

// World places one consumer, as torchrun's environment does: RANK,
// WORLD_SIZE and LOCAL_WORLD_SIZE, plus the DataLoader worker.
type World struct {
	// Rank is the global rank (RANK).
	Rank int `json:"rank"`
	// WorldSize is the number of ranks (WORLD_SIZE); 0 means 1.
	WorldSize int `json:"world_size"`
	// LocalWorldSize is the number of ranks per node (LOCAL_WORLD_SIZE);
	// 0 means 1.
	LocalWorldSize int `json:"local_world_size"`
	// Worker is the DataLoader worker index within the rank.
	Worker int `json:"worker"`
	// NumWorkers is the number of DataLoader workers of the rank; 0 means 1.
	NumWorkers int `json:"num_workers"`
}

// Open asks the agent for a dataset handle. Datasets with the same identity
// share one cache and one set of downloads, whatever job opens them.
type Open struct {
	Op      string  `json:"op"`
	Dataset Dataset `json:"dataset"`
	// Job names the training job. Consumers with the same job and dataset
	// share the epoch counters (MosaicML's next_epoch); the job's state is
	// dropped when its last connection closes.
	Job string `json:"job"`
	// World is the opener's place; it fixes the dataset's Length.
	World World `json:"world"`
	// Env holds the store settings of the opening process (its AWS_*,
	// S3_*, GOOGLE_*, GCS_*, AZURE_*, CLOUDSDK_* and STORAGE_EMULATOR_HOST
	// variables). The agent opens the dataset's stores with them instead
	// of its own environment, and datasets opened with different Env are
	// never shared. Nil (absent) means the agent's own environment.
	Env map[string]string `json:"env,omitempty"`
}

// Schema describes how the records of a shard are laid out.
type Schema struct {
	// Format is the shard format: "mds", "json", "csv", "tsv" or "xsv".
	Format string `json:"format"`
	// ColumnNames, ColumnEncodings and ColumnSizes follow index.json
	// (sizes are null for variable-size columns).
	ColumnNames     []string `json:"column_names"`
	ColumnEncodings []string `json:"column_encodings"`
	ColumnSizes     []*int64 `json:"column_sizes"`
	// Separator is the field separator of xsv shards.
	Separator string `json:"separator,omitempty"`
}

// Opened answers Open.
type Opened struct {
	Op string `json:"op"`
	// Handle names the dataset on this connection.
	Handle int `json:"handle"`
	// NumSamples is the number of distinct samples of the dataset.
	NumSamples int64 `json:"num_samples"`
	// EpochSize is the number of samples per epoch over all ranks.
	EpochSize int64 `json:"epoch_size"`
	// Length is the number of samples per rank per epoch (len() in Python).
	Length int64 `json:"length"`
	// Schemas are the distinct record layouts; ShardSchema maps each shard
	// to one of them.
	Schemas     []Schema `json:"schemas"`
	ShardSchema []int    `json:"shard_schema"`
	// ShardSamples is the number of samples of each shard.
	ShardSamples []int64 `json:"shard_samples"`
	// ShardURLs gives each shard's URL (WebDataset's __url__) when the
	// dataset has WebDataset tar shards, omitted otherwise: each URL is
	// ShardURLPrefix followed by its entry here (the prefix common to all
	// is sent once).
	ShardURLs      []string `json:"shard_urls,omitempty"`
	ShardURLPrefix string   `json:"shard_url_prefix,omitempty"`
	// NumCanonicalNodes and ShuffleSeed are the values in effect (0 means
	// not yet resolved).
	NumCanonicalNodes int   `json:"num_canonical_nodes"`
	ShuffleSeed       int64 `json:"shuffle_seed"`
	// Streams gives each stream's weights as the planner resolved them
	// (MosaicML sets them on its Stream objects).
	Streams []StreamWeight `json:"streams,omitempty"`
	// Warnings are for the user (the Python client raises each as a
	// UserWarning): an argument the agent could not honour as given.
	Warnings []string `json:"warnings,omitempty"`
}

// StreamWeight is a stream's resolved weight: the samples it contributes
// per epoch (choose), that over the epoch size (proportion), and over its
// own sample count (repeat); and where the stream sits among the
// dataset's shards and samples (MosaicML's shard_offset_per_stream,
// sample_offset_per_stream, samples_per_stream).
type StreamWeight struct {
	Proportion float64 `json:"proportion"`
	Repeat     float64 `json:"repeat"`
	Choose     int64   `json:"choose"`
	// Samples is the stream's own sample count; FirstShard and
	// FirstSample are its first shard's and sample's global indices.
	Samples     int64 `json:"samples"`
	FirstShard  int   `json:"first_shard"`
	FirstSample int64 `json:"first_sample"`
}

// State is MosaicML's dataset state dict (spec §13.4).
type State struct {
	Epoch                int64  `json:"epoch"`
	SampleInEpoch        int64  `json:"sample_in_epoch"`
	NumCanonicalNodes    int    `json:"num_canonical_nodes"`
	ShuffleSeed          int64  `json:"shuffle_seed"`
	InitialPhysicalNodes *int64 `json:"initial_physical_nodes,omitempty"`
}

// Begin starts an epoch's iteration for one (rank, worker).
type Begin struct {
	Op     string `json:"op"`
	Handle int    `json:"handle"`
	World  World  `json:"world"`
	// Resume is the state loaded with load_state_dict, if any. It applies
	// when its epoch is not older than the epoch this worker would start.
	Resume *State `json:"resume,omitempty"`
	// Epoch, when non-nil, forces the epoch (used to recover after an agent
	// restart); otherwise the job's counter for this worker decides.
	Epoch *int64 `json:"epoch,omitempty"`
	// SampleInEpoch goes with Epoch: the global resume position.
	SampleInEpoch int64 `json:"sample_in_epoch,omitempty"`
	// Skip drops this many of the worker's own samples first.
	Skip int64 `json:"skip,omitempty"`
	// Round names the iteration this worker belongs to: the same for
	// every worker of one DataLoader iteration (its base seed, or a token
	// the client draws per iteration), so the agent tells a late worker of
	// the rank's current epoch from the first worker of the next one.
	// Empty: the agent decides from the worker's index and count alone.
	Round string `json:"round,omitempty"`
	// MapCopies says the iteration's Next requests ask for MapCopies:
	// the records copied ahead go to the memory file from its first
	// sample, not only from the first Next on (before it, they are
	// copied for the socket, up to 2 MiB of them).
	MapCopies bool `json:"map_copies,omitempty"`
}

// Begun answers Begin.
type Begun struct {
	Op string `json:"op"`
	// Iter names the iteration on this connection.
	Iter int `json:"iter"`
	// Epoch and SampleInEpoch are where the iteration starts.
	Epoch         int64 `json:"epoch"`
	SampleInEpoch int64 `json:"sample_in_epoch"`
	// NumCanonicalNodes, ShuffleSeed and InitialPhysicalNodes are in effect
	// for this epoch (they come from the resume state when one applied).
	NumCanonicalNodes    int   `json:"num_canonical_nodes"`
	ShuffleSeed          int64 `json:"shuffle_seed"`
	InitialPhysicalNodes int64 `json:"initial_physical_nodes"`
	// Warnings are for the user (the Python client raises each as a
	// UserWarning), sent to rank 0's worker 0 only: a resume that is not
	// exactly-once (plan.Epoch.ResumeCheck).
	Warnings []string `json:"warnings,omitempty"`
}

// Next asks for the next samples of an iteration.
type Next struct {
	Op   string `json:"op"`
	Iter int    `json:"iter"`
	// Max bounds the samples in the reply (at least 1).
	Max int `json:"max"`
	// InlineMax inlines records of at most this many bytes into the reply
	// (0: never).
	InlineMax int `json:"inline_max,omitempty"`
	// WaitMS bounds how long the agent waits for the first sample before it
	// answers with an empty, not-done batch (0: the agent's default).
	WaitMS int `json:"wait_ms,omitempty"`
	// Release lists batches the client is done with.
	Release []int64 `json:"release,omitempty"`
	// MapCopies asks for the records the agent copies ahead under a
	// cache limit in a memory file rather than inline: the reply lists
	// the file as a shard entry with its Mem id (and that shard's index,
	// the file's Size), and the first reply that lists a file carries its
	// descriptor (Batch.MemFD, SCM_RIGHTS on the reply's first bytes), to
	// be mapped once and read as a leased shard's records. The file has
	// no name. A record's bytes hold until its batch is released; the
	// file is rewritten after that, so a view kept longer must be copied
	// first. Agents before this field send the records inline.
	MapCopies bool `json:"map_copies,omitempty"`
}

// BatchShard names a shard file a batch refers to.
type BatchShard struct {
	// Shard is the global shard index. A memory file's entry (Mem) lists
	// the copies of records of one layout (Opened.ShardSchema), whichever
	// shards they came from, and names one of those shards: read its
	// records with that shard's layout.
	Shard int `json:"shard"`
	// Path is the absolute path of the raw, uncompressed shard file.
	Path string `json:"path"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// Mem, when not 0, says the entries are in the connection's memory
	// file of that id (Next.MapCopies), not in the shard's file: Path is
	// empty.
	Mem int `json:"mem,omitempty"`
}

// Batch is the header of a batch reply; the entries are in the body.
type Batch struct {
	Op string `json:"op"`
	// ID names the batch for Release; 0 when it holds no lease.
	ID int64 `json:"id"`
	// N is the number of entries in the body.
	N int `json:"n"`
	// Shards are the files the entries refer to.
	Shards []BatchShard `json:"shards"`
	// Done reports the end of the iteration (no entries follow).
	Done bool `json:"done"`
	// MemFD is the id of the memory file (BatchShard.Mem) whose
	// descriptor comes with this reply, attached to its first bytes as
	// SCM_RIGHTS; 0 for none. The descriptor comes once a connection.
	MemFD int `json:"mem_fd,omitempty"`
	// Unmap lists memory files the agent dropped: their batches were
	// all released, and the client unmaps them.
	Unmap []int `json:"unmap,omitempty"`
}

// Release hands batches back.
type Release struct {
	Op      string  `json:"op"`
	Batches []int64 `json:"batches"`
}

// End stops an iteration and releases its batches.
type End struct {
	Op   string `json:"op"`
	Iter int    `json:"iter"`
}

// Get asks for one sample by its global index (random access).
type Get struct {
	Op     string `json:"op"`
	Handle int    `json:"handle"`
	Index  int64  `json:"index"`
	// InlineMax as in Next.
	InlineMax int `json:"inline_max,omitempty"`
	// Release as in Next.
	Release []int64 `json:"release,omitempty"`
}

// EpochQuery asks where a rank's iteration stands, for state_dict.
type EpochQuery struct {
	Op     string `json:"op"`
	Handle int    `json:"handle"`
	Rank   int    `json:"rank"`
}

// EpochInfo answers EpochQuery.
type EpochInfo struct {
	Op string `json:"op"`
	// NextEpoch is MosaicML's next_epoch for the rank: one past the
	// newest epoch any of its workers started, 0 before any iteration.
	NextEpoch int64 `json:"next_epoch"`
	// NumCanonicalNodes, ShuffleSeed and InitialPhysicalNodes as in Begun,
	// for the newest epoch started (0 when none).
	NumCanonicalNodes    int   `json:"num_canonical_nodes"`
	ShuffleSeed          int64 `json:"shuffle_seed"`
	InitialPhysicalNodes int64 `json:"initial_physical_nodes"`
}

// StatsQuery asks for the agent's figures.
type StatsQuery struct {
	Op string `json:"op"`
}

// Stats answers StatsQuery.
type Stats struct {
	Op          string `json:"op"`
	PID         int    `json:"pid"`
	Connections int    `json:"connections"`
	Datasets    int    `json:"datasets"`
	Jobs        int    `json:"jobs"`
	Iterations  int    `json:"iterations"`
	Leases      int    `json:"leases"`
	Samples     int64  `json:"samples"`
	// Downloads counts the files the agent's caches downloaded.
	Downloads int64 `json:"downloads"`
}

// OK answers requests that return nothing else.
type OK struct {
	Op string `json:"op"`
}

// Entry is one decoded batch entry.
type Entry struct {
	// Sample is the global sample ID.
	Sample int64
	// Ref indexes Batch.Shards; with InlineFlag set the record is inlined.
	Ref uint32
	// Length is the record's length in bytes.
	Length uint32
	// Offset is the record's offset in its shard file, or in the inline
	// area when Ref has InlineFlag.
	Offset uint64
}

// AppendEntry appends the 24-byte encoding of e to dst.
func AppendEntry(dst []byte, e Entry) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(e.Sample))
	dst = binary.LittleEndian.AppendUint32(dst, e.Ref)
	dst = binary.LittleEndian.AppendUint32(dst, e.Length)
	return binary.LittleEndian.AppendUint64(dst, e.Offset)
}

// ParseEntries decodes the n entries of a batch body and checks each
// against the batch: refs name a listed shard, and every record lies inside
// its shard file or the inline area. It returns the entries and the inline
// area.
func ParseEntries(b Batch, body []byte) ([]Entry, []byte, error) {
	if b.N < 0 || b.N > len(body)/EntrySize {
		return nil, nil, fmt.Errorf("%w: batch of %d entries does not fit a body of %d bytes", ErrFrame, b.N, len(body))
	}
	inline := body[b.N*EntrySize:]
	out := make([]Entry, b.N)
	for i := range out {
		p := body[i*EntrySize:]
		e := Entry{
			Sample: int64(binary.LittleEndian.Uint64(p[0:8])),
			Ref:    binary.LittleEndian.Uint32(p[8:12]),
			Length: binary.LittleEndian.Uint32(p[12:16]),
			Offset: binary.LittleEndian.Uint64(p[16:24]),
		}
		ref := e.Ref &^ InlineFlag
		if int64(ref) >= int64(len(b.Shards)) {
			return nil, nil, fmt.Errorf("%w: entry %d names shard ref %d of %d", ErrFrame, i, ref, len(b.Shards))
		}
		limit := uint64(max(b.Shards[ref].Size, 0))
		if e.Ref&InlineFlag != 0 {
			limit = uint64(len(inline))
		}
		if e.Offset > limit || uint64(e.Length) > limit-e.Offset {
			return nil, nil, fmt.Errorf("%w: entry %d: record [%d, +%d) outside its %d bytes", ErrFrame, i, e.Offset, e.Length, limit)
		}
		out[i] = e
	}
	return out, inline, nil
}
