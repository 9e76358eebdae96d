package convert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
)

// JournalDir is the directory (under the part's output) of the progress
// journal: one small object per committed shard, written after the shard
// itself, removed once index.json is written. A restarted conversion
// resumes after the last shard whose journal entry and file are intact.
const JournalDir = ".sluice-convert"

// maxJournalBytes bounds one journal object.
const maxJournalBytes = 64 << 20

// journalVersion changes whenever the meaning of a journal entry changes.
const journalVersion = 1

// Stats are the cumulative figures of a conversion.
type Stats struct {
	// SamplesIn counts input records of this part, skipped ones included.
	SamplesIn int64 `json:"samples_in"`
	// SamplesOut counts records written.
	SamplesOut int64 `json:"samples_out"`
	// Failures counts skipped records by reason.
	Failures map[string]int64 `json:"failures"`
	// Nulls counts null or missing values per column (in records that
	// were read, whatever the null policy did with them).
	Nulls map[string]int64 `json:"nulls,omitempty"`
	// FetchAttempted and FetchSucceeded count URL fetches.
	FetchAttempted int64 `json:"fetch_attempted"`
	FetchSucceeded int64 `json:"fetch_succeeded"`
	// Tokens counts the token ids packed (EOS ids included), and
	// TokensDropped those of a dropped last partial block (--pack).
	Tokens        int64 `json:"tokens,omitempty"`
	TokensDropped int64 `json:"tokens_dropped,omitempty"`
	// Shards counts shards written.
	Shards int `json:"shards"`
	// RawBytes sums the uncompressed shard sizes; StoredBytes the sizes of
	// the files actually stored.
	RawBytes    int64 `json:"raw_bytes"`
	StoredBytes int64 `json:"stored_bytes"`
}

func (s *Stats) clone() Stats {
	c := *s
	c.Failures = make(map[string]int64, len(s.Failures))
	for k, v := range s.Failures {
		c.Failures[k] = v
	}
	if s.Nulls != nil {
		c.Nulls = make(map[string]int64, len(s.Nulls))
		for k, v := range s.Nulls {
			c.Nulls[k] = v
		}
	}
	return c
}

func (s *Stats) skipped() int64 {
	var n int64
	for _, v := range s.Failures {
		n += v
	}
	return n
}

// journalEntry is the record of one committed shard.
type journalEntry struct {
	Version     int     `json:"version"`
	Fingerprint string  `json:"fingerprint"`
	Shard       int     `json:"shard"`
	Next        int64   `json:"next"` // input position (part-local) after the shard
	Stats       Stats   `json:"stats"`
	ElapsedSec  float64 `json:"elapsed_s"`
	Index       string  `json:"index"` // index.json text with this one shard entry
	// Carry holds the packed tokens not yet in a shard (--pack): a restart
	// starts its token stream with them.
	Carry []int32 `json:"carry,omitempty"`
}

func journalKey(prefix string, shard int) string {
	return fmt.Sprintf("%s%s/shard.%08d", prefix, JournalDir, shard)
}

// fingerprint identifies everything that determines the output bytes, so
// a restart with other settings cannot splice two different conversions.
func fingerprint(r *resolved, l *layout) string {
	v := struct {
		V           int
		Input       string
		Format      string
		Names, Encs []string
		Compression string
		Hashes      []string
		SizeLimit   int64
		Part        [2]int
		Fetch       map[string]string
		MaxSide     int
		JPEGQuality int
		SkipInvalid bool
		Nulls       string
		ImageEnc    string
		Tokenize    []TokenizeColumn
		Pack        int
		DropLast    bool
		Schemes     []string
		FileRoot    string
		AllowNets   []string
	}{journalVersion, r.Input, r.Format, l.names(), l.encodings(), r.Compression, r.hashes, r.sizeLimit,
		[2]int{r.Part.Index, r.Part.Count}, r.fetchIdx, r.MaxSide, r.JPEGQuality, r.SkipInvalid, r.Nulls, r.ImageEncoding, r.Tokenize, r.Pack, r.PackDropLast,
		r.FetchSchemes, r.FetchFileRoot, prefixStrings(r.FetchAllowNets)}
	b, _ := json.Marshal(v) // plain data: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// removeLocalTemps deletes the temporary files a killed writer left in a
// local output directory (the file store hides them from List).
func removeLocalTemps(output, prefix string) error {
	dir := output
	if strings.Contains(output, "://") {
		u, err := storage.ParseURL(output)
		if err != nil || u.Scheme != "file" {
			return nil // object stores never show partial objects
		}
		dir = u.Path
	}
	for _, d := range []string{filepath.Join(dir, filepath.FromSlash(prefix)), filepath.Join(dir, filepath.FromSlash(prefix), JournalDir)} {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue // nothing there yet
		}
		for _, e := range ents {
			if !e.IsDir() && storage.IsTempName(e.Name()) {
				if err := os.Remove(filepath.Join(d, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("convert: remove leftover temporary file: %w", err)
				}
			}
		}
	}
	return nil
}

// resumeState is what a restarted conversion takes over from its journal.
type resumeState struct {
	finished bool    // the output holds index.json and no journal
	carry    []int32 // packed tokens not yet in a shard
	shards   []format.ShardInfo
	next     int64
	stats    Stats
	elapsed  float64
}

// loadJournal reads the journal under prefix and returns the longest run
// of shards 0..k-1 whose entries match fp and whose files are intact.
// Entries after the run are deleted (their shards will be rewritten).
func loadJournal(ctx context.Context, b storage.Bucket, prefix, fp string) (*resumeState, error) {
	st := &resumeState{}
	var keys []string
	sizes := map[string]int64{}
	var temps []string
	err := b.List(ctx, prefix, func(o storage.ObjectInfo) error {
		rest := strings.TrimPrefix(o.Key, prefix)
		if storage.IsTempName(o.Key) {
			temps = append(temps, o.Key) // left by a killed writer
			return nil
		}
		if strings.HasPrefix(rest, JournalDir+"/") {
			keys = append(keys, o.Key)
		} else {
			sizes[rest] = o.Size
		}
		return nil
	})
	if err != nil && !errors.Is(err, storage.ErrNotExist) {
		return nil, fmt.Errorf("convert: list output: %w", err)
	}
	for _, key := range temps {
		if err := b.Delete(ctx, key); err != nil && !errors.Is(err, storage.ErrNotExist) {
			return nil, fmt.Errorf("convert: remove leftover temporary file: %w", err)
		}
	}
	if len(keys) == 0 {
		if _, ok := sizes[format.IndexFile]; ok {
			st.finished = true
		}
		return st, nil
	}
	valid := 0
	for i, key := range keys { // List returns lexical order: shard.00000000, ...
		if key != journalKey(prefix, i) {
			break
		}
		raw, err := storage.ReadAll(ctx, b, key, maxJournalBytes)
		if err != nil {
			return nil, fmt.Errorf("convert: read journal: %w", err)
		}
		var e journalEntry
		if err := json.Unmarshal(raw, &e); err != nil || e.Version != journalVersion || e.Shard != i {
			break // a torn or foreign entry ends the usable run
		}
		if e.Fingerprint != fp {
			return nil, fmt.Errorf("convert: %s holds an unfinished conversion with other settings or input; rerun with the same settings, or remove it", b.URL(prefix))
		}
		idx, err := format.ParseIndex([]byte(e.Index))
		if err != nil || len(idx.Shards) != 1 {
			break
		}
		sh := idx.Shards[0]
		intact := true
		for _, fi := range sh.Files() {
			if sizes[fi.Basename] != fi.Bytes {
				intact = false
			}
		}
		if !intact {
			break
		}
		st.shards = append(st.shards, sh)
		st.next, st.stats, st.elapsed, st.carry = e.Next, e.Stats, e.ElapsedSec, e.Carry
		valid = i + 1
	}
	for _, key := range keys[valid:] {
		if err := b.Delete(ctx, key); err != nil && !errors.Is(err, storage.ErrNotExist) {
			return nil, fmt.Errorf("convert: clean journal: %w", err)
		}
	}
	if st.stats.Failures == nil {
		st.stats.Failures = map[string]int64{}
	}
	return st, nil
}

func writeJournal(ctx context.Context, b storage.Bucket, prefix string, e *journalEntry) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("convert: journal: %w", err)
	}
	return putObject(ctx, b, journalKey(prefix, e.Shard), raw, "application/json")
}

func removeJournal(ctx context.Context, b storage.Bucket, prefix string, shards int) error {
	for k := 0; k < shards; k++ {
		if err := b.Delete(ctx, journalKey(prefix, k)); err != nil && !errors.Is(err, storage.ErrNotExist) {
			return fmt.Errorf("convert: remove journal: %w", err)
		}
	}
	return nil
}

// putObject stores data under key; the object appears only once complete.
// Through the retry decorator a failed upload is repeated as a whole.
func putObject(ctx context.Context, b storage.Bucket, key string, data []byte, contentType string) error {
	if err := storage.Upload(ctx, b, key, bytes.NewReader(data), int64(len(data)), &storage.WriteOptions{ContentType: contentType}); err != nil {
		return fmt.Errorf("convert: write %s: %w", b.URL(key), err)
	}
	return nil
}
