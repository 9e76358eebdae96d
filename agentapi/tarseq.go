package agentapi

// Tar datasets streamed in WebDataset's sequential way, without an index
// (docs/format/wds.md, "no-index mode"; docs/protocol.md, "Tar sequence").
// A client opens the dataset (tarseq_open), begins one reader's epoch
// (tarseq_begin: its rank among ranks, its DataLoader worker among
// workers), takes samples (tarseq_next: replies tarseq_batch, whose body is
// the samples' tar records one after another) and ends it (tarseq_end).
// tarseq_state maps the samples a rank has consumed onto one resume state
// per worker.
const (
	OpTarSeqOpen  = "tarseq_open"
	OpTarSeqBegin = "tarseq_begin"
	OpTarSeqNext  = "tarseq_next"
	OpTarSeqEnd   = "tarseq_end"
	OpTarSeqState = "tarseq_state"
	OpTarSeqBatch = "tarseq_batch"
)

// TarSeqOpen opens a tar dataset for sequential streaming.
type TarSeqOpen struct {
	Op  string `json:"op"`
	Job string `json:"job"`
	// Remote is the tar dataset: a brace pattern, "::" list, .tar URL, or
	// a directory/prefix of .tar objects (local paths absolute).
	Remote string `json:"remote"`
	// Local is the cache directory (absolute); "" for the agent's default.
	Local           string   `json:"local,omitempty"`
	CacheLimit      string   `json:"cache_limit,omitempty"`
	Shuffle         bool     `json:"shuffle,omitempty"` // WebDataset's shardshuffle
	ShuffleSeed     *int64   `json:"shuffle_seed,omitempty"`
	DownloadRetry   *int     `json:"download_retry,omitempty"`
	DownloadTimeout *float64 `json:"download_timeout,omitempty"` // seconds
	// Env is the job's store settings, as for Open.
	Env map[string]string `json:"env,omitempty"`
}

// TarSeqOpened answers TarSeqOpen.
type TarSeqOpened struct {
	Op     string `json:"op"`
	Handle int    `json:"handle"`
	// ShardURLs is each shard's URL (its samples' __url__), credentials
	// redacted; its length is the number of shards.
	ShardURLs []string `json:"shard_urls"`
}

// TarSeqState is one reader's resume position (stream.TarSeqState).
type TarSeqState struct {
	Epoch   int64 `json:"epoch"`
	Ranks   int   `json:"ranks"`
	Workers int   `json:"workers"`
	Rank    int   `json:"rank"`
	Worker  int   `json:"worker"`
	Shard   int   `json:"shard"`  // position in the reader's shard list
	Sample  int   `json:"sample"` // samples of that shard delivered
}

// TarSeqBegin begins one reader's next epoch, or resumes it.
type TarSeqBegin struct {
	Op      string `json:"op"`
	Handle  int    `json:"handle"`
	Rank    int    `json:"rank"`
	Ranks   int    `json:"ranks"`
	Worker  int    `json:"worker"`
	Workers int    `json:"workers"`
	// Resume, when set, continues from this state (taken on the same
	// shape, or the agent answers CodeInvalid), unless a begin of this job
	// and reader already used ResumeToken: a DataLoader starts its workers
	// afresh each epoch with the dataset as loaded, and only the first
	// epoch after load_state_dict resumes.
	Resume      *TarSeqState `json:"resume,omitempty"`
	ResumeToken string       `json:"resume_token,omitempty"`
}

// TarSeqBegun answers TarSeqBegin.
type TarSeqBegun struct {
	Op     string `json:"op"`
	Iter   int    `json:"iter"`
	Epoch  int64  `json:"epoch"`
	Shards []int  `json:"shards"` // the reader's shards, in order
}

// TarSeqNext asks for up to Max samples.
type TarSeqNext struct {
	Op   string `json:"op"`
	Iter int    `json:"iter"`
	Max  int    `json:"max,omitempty"`
}

// TarSeqBatch answers TarSeqNext: N samples whose tar records follow one
// another in the body, Lengths[i] bytes each, from shard Shards[i]. Done:
// the reader's epoch has ended (N is then 0).
type TarSeqBatch struct {
	Op      string  `json:"op"`
	N       int     `json:"n"`
	Done    bool    `json:"done,omitempty"`
	Lengths []int64 `json:"lengths"`
	Shards  []int   `json:"shards"`
}

// TarSeqEnd ends an iteration; the agent answers OK.
type TarSeqEnd struct {
	Op   string `json:"op"`
	Iter int    `json:"iter"`
}

// TarSeqStateQuery asks for the resume states of rank's Workers readers
// after NumSamples samples of the rank's current epoch were consumed from
// a torch DataLoader with BatchSize (the workers' batches taken in turn,
// a worker whose epoch ended dropping out, as torch does).
type TarSeqStateQuery struct {
	Op         string `json:"op"`
	Handle     int    `json:"handle"`
	Rank       int    `json:"rank"`
	Ranks      int    `json:"ranks"`
	Workers    int    `json:"workers,omitempty"` // 0: those of the rank's latest begin
	BatchSize  int    `json:"batch_size"`
	NumSamples int64  `json:"num_samples"`
}

// TarSeqStates answers TarSeqStateQuery: one state per worker.
type TarSeqStates struct {
	Op      string        `json:"op"`
	Workers []TarSeqState `json:"workers"`
}
