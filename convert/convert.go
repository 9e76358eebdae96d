package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/convert/fetch"
	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
)

// ErrQualityGate is returned (wrapped) when a conversion finishes below
// its minimum fetch success rate.
var ErrQualityGate = errors.New("convert: quality gate failed")

// Run converts opts.Input into an MDS dataset at opts.Output and returns
// the report, which is also stored next to the index. On failure the
// shards committed so far and the journal stay, and a new Run with the same
// options resumes after them.
func Run(ctx context.Context, opts *Options) (*Report, error) {
	start := time.Now()
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	rawOut, err := r.Registry.Open(ctx, r.Output)
	if err != nil {
		return nil, fmt.Errorf("convert: output: %w", err)
	}
	out, err := retry.New(rawOut, nil)
	if err != nil {
		rawOut.Close()
		return nil, fmt.Errorf("convert: output: %w", err)
	}
	defer out.Close()

	cols, err := resolveColumns(ctx, r)
	if err != nil {
		return nil, err
	}
	lay, err := newLayout(cols, r.Nulls == NullsDefault)
	if err != nil {
		return nil, err
	}
	fp := fingerprint(r, lay)
	if err := removeLocalTemps(r.Output, r.prefix); err != nil {
		return nil, err
	}
	resume, err := loadJournal(ctx, out, r.prefix, fp)
	if err != nil {
		return nil, err
	}
	if resume.finished {
		return finishedRun(ctx, out, r, fp, lay)
	}

	read := lay.names()
	for _, t := range r.Tokenize {
		read = append(read, t.Column)
	}
	src, err := input.Open(ctx, r.Input, &input.Options{Registry: r.Registry, Format: r.Format, Part: r.Part, TempDir: r.TempDir, Columns: read, ImageEncoding: r.ImageEncoding})
	if err != nil {
		return nil, err
	}
	defer src.Close()

	var fetcher *fetch.Fetcher
	if len(r.Fetch) > 0 {
		if fetcher, err = r.newFetcher(); err != nil {
			return nil, err
		}
		defer fetcher.Close()
		for col := range r.fetchIdx {
			if _, ok := lay.index[col]; !ok {
				return nil, fmt.Errorf("convert: --fetch column %q is not a column of the output", col)
			}
		}
	}

	p := &pipeline{r: r, lay: lay, src: src, out: out, fetcher: fetcher, fp: fp, resume: resume, start: start}
	if fetcher != nil {
		p.fetchCols = p.fetchPlan()
	}
	if err := p.loadTokenizers(); err != nil {
		return nil, err
	}
	if err := p.run(ctx); err != nil {
		return nil, err
	}
	return p.finish(ctx)
}

// resolveColumns settles the output columns: given ones, the source's
// schema, or inference over the first records of the whole input (all
// parts infer from the same records, so they agree).
func resolveColumns(ctx context.Context, r *resolved) ([]input.Column, error) {
	if r.Pack > 0 {
		return []input.Column{{Name: r.Tokenize[0].Column + IDsSuffix, Encoding: "ndarray:int32"}}, nil
	}
	cols, err := resolveInputColumns(ctx, r)
	if err != nil {
		return nil, err
	}
	for _, t := range r.Tokenize {
		name := t.Column + IDsSuffix
		found := false
		for i := range cols {
			if cols[i].Name == name {
				cols[i].Encoding, found = "ndarray:int32", true
			}
		}
		if !found {
			cols = append(cols, input.Column{Name: name, Encoding: "ndarray:int32"})
		}
	}
	return cols, nil
}

// resolveInputColumns settles the columns that come from the input.
func resolveInputColumns(ctx context.Context, r *resolved) ([]input.Column, error) {
	var want []string
	for _, c := range r.Columns {
		want = append(want, c.Name)
	}
	src, err := input.Open(ctx, r.Input, &input.Options{Registry: r.Registry, Format: r.Format, TempDir: r.TempDir, Columns: want, ImageEncoding: r.ImageEncoding})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	known := src.Columns()
	cols := known
	if len(r.Columns) > 0 {
		byName := map[string]string{}
		for _, c := range known {
			byName[c.Name] = c.Encoding
		}
		cols = make([]input.Column, len(r.Columns))
		for i, c := range r.Columns {
			cols[i] = c
			if cols[i].Encoding == "" {
				cols[i].Encoding = byName[c.Name]
			}
		}
	}
	for i := range cols {
		if enc, ok := r.fetchIdx[cols[i].Name]; ok {
			cols[i].Encoding = enc
		}
	}
	needInfer := len(cols) == 0
	for _, c := range cols {
		if c.Encoding == "" {
			needInfer = true
		}
	}
	if !needInfer {
		return cols, nil
	}
	inferred, err := inferColumns(ctx, src, cols, r.InferRows, r.SkipInvalid)
	if err != nil {
		return nil, err
	}
	if len(r.Columns) > 0 {
		inferred = inferred[:len(cols)] // only the requested columns
	}
	for i := range inferred {
		if enc, ok := r.fetchIdx[inferred[i].Name]; ok {
			inferred[i].Encoding = enc
		}
	}
	return inferred, nil
}

// batch is one unit of work: input items in, records (or skip reasons)
// out.
type batch struct {
	seq     int64
	items   []input.Item
	records [][]byte // nil where the item was skipped
	reasons []string // skip reason where records[i] is nil
	fetched int      // fetches attempted
	fetchOK int
	nulls   []int64   // null or missing values per layout column
	tokens  [][]int32 // with --pack: each document's token ids
	ntokens int64     // without --pack: ids written
	// err is the batch's first failure (in input order within the batch);
	// the sequencer returns it when the batch's turn comes, so the error
	// names the first bad record of the input, not the first worker's.
	err error
}

// shardJob is one shard cut by the sequencer, to be built and committed.
type shardJob struct {
	index   int
	records [][]byte
	bytes   int64   // sum of record lengths
	next    int64   // input position after the shard
	stats   Stats   // figures up to next (this shard not yet counted)
	carry   []int32 // packed tokens not in this or earlier shards
	done    chan shardResult
	res     shardResult // set by the uploader
	stored  chan error  // the upload's outcome
}

// maxUploads bounds the shard files being stored at once.
const maxUploads = 4

type shardResult struct {
	info    format.ShardInfo
	file    []byte // stored file (compressed or raw)
	rawSize int64
	err     error
}

type pipeline struct {
	r       *resolved
	lay     *layout
	src     input.Source
	out     storage.Bucket
	fetcher *fetch.Fetcher
	// fetchCols are the URL columns, in layout order.
	fetchCols []fetchCol
	// tokenizers are the --tokenize columns.
	tokenizers []tokCol
	fp         string
	resume     *resumeState
	start      time.Time

	config    []byte // the shard header's config JSON
	batchSize int
	comp      *compress.Compressor

	// Figures read by the progress goroutine.
	read, written, skipped, bytes atomic.Int64
	shards                        atomic.Int64

	// Set by the sequencer and committer; read after the pipeline ends.
	infos             []format.ShardInfo
	stats             Stats // figures taken over from the journal
	final             Stats // the sequencer's final figures
	cumRaw, cumStored int64
}

func (p *pipeline) shardTemplate() format.ShardInfo {
	return format.ShardInfo{
		Format: "mds", Version: 2,
		ColumnEncodings: p.lay.encodings(), ColumnNames: p.lay.names(), ColumnSizes: p.lay.sizes(),
		Compression: p.r.Compression, Hashes: p.r.hashes, SizeLimit: p.r.sizeLimit,
	}
}

func (p *pipeline) run(ctx context.Context) error {
	tmpl := p.shardTemplate()
	p.config = format.AppendConfig(nil, &tmpl)
	if p.r.Compression != "" {
		c, err := compress.NewCompressor(p.r.Compression)
		if err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		defer c.Close()
		p.comp = c
	}
	p.infos = append([]format.ShardInfo(nil), p.resume.shards...)
	p.stats = p.resume.stats.clone()
	p.cumRaw, p.cumStored = p.stats.RawBytes, p.stats.StoredBytes
	p.read.Store(p.stats.SamplesIn)
	p.written.Store(p.stats.SamplesOut)
	p.skipped.Store(p.stats.skipped())
	p.bytes.Store(p.stats.StoredBytes)
	p.shards.Store(int64(len(p.infos)))

	g, ctx := errgroup.WithContext(ctx)
	workers := p.r.Workers
	ioBound := false
	if iob, ok := p.src.(input.IOBound); ok && iob.IOBound() {
		ioBound = true
		workers = max(workers, 4*p.r.Workers, 16) // overlap reads
	}
	if p.batchSize = p.r.BatchSize; p.batchSize <= 0 {
		switch {
		case p.fetcher != nil:
			p.batchSize = 32
		case ioBound:
			p.batchSize = 64
		default:
			p.batchSize = 512
		}
	}
	if p.fetcher != nil {
		// Enough batches in flight to keep the fetch pool busy.
		workers = max(workers, 2*p.fetcher.Concurrency()/p.batchSize+p.r.Workers)
	}
	window := make(chan struct{}, 2*workers) // batches between reader and sequencer
	work := make(chan *batch, workers)
	results := make(chan *batch, workers)
	commits := make(chan *shardJob, p.r.Workers+1)
	buildSem := make(chan struct{}, p.r.Workers)

	stopProgress := p.startProgress()
	defer stopProgress()

	g.Go(func() error { // reader
		defer close(work)
		skip := p.resume.next
		var seq int64
		for {
			items, err := p.src.Read(ctx, nil, p.batchSize)
			if skip > 0 && len(items) > 0 {
				n := int(min(skip, int64(len(items))))
				items = items[n:]
				skip -= int64(n)
			}
			if len(items) > 0 {
				select {
				case window <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				select {
				case work <- &batch{seq: seq, items: items}:
				case <-ctx.Done():
					return ctx.Err()
				}
				seq++
			}
			if err == io.EOF {
				if skip > 0 {
					return fmt.Errorf("convert: the input has fewer records than the journal of %s says were converted; it changed since the interrupted run", p.out.URL(p.r.prefix))
				}
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		g.Go(func() error {
			defer wg.Done()
			row := make([]input.Value, len(p.lay.cols))
			hint := 64 << 10 // arena size of this worker's last batch
			for b := range work {
				if err := p.process(ctx, b, row, &hint); err != nil {
					if ctx.Err() != nil {
						return err
					}
					b.err = err
				}
				select {
				case results <- b:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}
	g.Go(func() error { wg.Wait(); close(results); return nil })
	g.Go(func() error { // sequencer
		defer close(commits)
		return p.sequence(ctx, results, window, commits, buildSem)
	})
	uploads := make(chan *shardJob, maxUploads)
	upSem := make(chan struct{}, maxUploads)
	var upWG sync.WaitGroup
	defer upWG.Wait()
	g.Go(func() error { // uploader: stores shard files as they are built, several at once
		defer close(uploads)
		for job := range commits {
			select {
			case job.res = <-job.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if job.res.err != nil {
				return job.res.err
			}
			select {
			case upSem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			job.stored = make(chan error, 1)
			upWG.Add(1)
			go func() {
				defer upWG.Done()
				defer func() { <-upSem }()
				job.stored <- p.store(ctx, job)
			}()
			select {
			case uploads <- job:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	g.Go(func() error { // journaler: records stored shards in shard order
		for job := range uploads {
			var err error
			select {
			case err = <-job.stored:
			case <-ctx.Done():
				return ctx.Err()
			}
			if err != nil {
				return err
			}
			if err := p.journal(ctx, job); err != nil {
				return err
			}
		}
		return nil
	})
	err := g.Wait()
	upWG.Wait()
	return err
}

// startProgress calls Options.Progress periodically until the returned
// function is called.
func (p *pipeline) startProgress() (stop func()) {
	if p.r.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(p.r.ProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.r.Progress(p.snapshot(false))
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (p *pipeline) snapshot(final bool) Progress {
	return Progress{
		SamplesIn: p.read.Load(), SamplesOut: p.written.Load(), Skipped: p.skipped.Load(),
		Shards: int(p.shards.Load()), Bytes: p.bytes.Load(), Elapsed: time.Since(p.start), Done: final,
	}
}

// finish writes index.json (unless the quality gate failed), the report,
// and removes the journal.
func (p *pipeline) finish(ctx context.Context) (*Report, error) {
	final := p.final
	final.Shards, final.RawBytes, final.StoredBytes = len(p.infos), p.cumRaw, p.cumStored
	if final.Failures == nil {
		final.Failures = map[string]int64{}
	}
	rep := &Report{
		Input: p.r.Input, Output: p.out.URL(p.r.prefix), Columns: p.columns(),
		Compression: p.r.Compression, Hashes: p.r.hashes, SizeLimit: p.r.sizeLimit,
		Stats: final, MinSuccessRate: p.r.MinSuccessRate,
		Seconds:       p.resume.elapsed + time.Since(p.start).Seconds(),
		ResumedShards: len(p.resume.shards),
		Fingerprint:   p.fp,
	}
	if p.r.Part.Count > 1 {
		part := p.r.Part
		rep.Part = &part
	}
	rep.finish()
	if p.r.Progress != nil {
		p.r.Progress(p.snapshot(true))
	}
	reportKey := p.r.prefix + ReportFile
	if p.r.Part.Count > 1 {
		reportKey = fmt.Sprintf("%s%d.json", ReportPartPrefix, p.r.Part.Index)
	}
	if !rep.Passed {
		if err := writeReport(ctx, p.out, reportKey, rep); err != nil {
			return rep, err
		}
		return rep, fmt.Errorf("%w: %d of %d fetches succeeded (%.2f%%) and %d of %d records were kept (%.2f%%); the minimum is %.2f%%; index.json not written",
			ErrQualityGate, rep.FetchSucceeded, rep.FetchAttempted, 100*rep.FetchSuccessRate,
			rep.SamplesOut, rep.SamplesIn, 100*rep.RecordSuccessRate, 100*rep.MinSuccessRate)
	}
	if cl, ok := p.src.(interface{ Classes() []string }); ok {
		rep.Labels = map[string]int64{}
		for i, c := range cl.Classes() {
			rep.Labels[c] = int64(i)
		}
		raw, err := json.MarshalIndent(rep.Labels, "", "  ")
		if err != nil {
			return rep, fmt.Errorf("convert: labels: %w", err)
		}
		if err := putObject(ctx, p.out, p.r.prefix+LabelsFile, append(raw, '\n'), "application/json"); err != nil {
			return rep, err
		}
	}
	idx := format.AppendIndex(nil, &format.Index{Shards: p.infos})
	if err := putObject(ctx, p.out, p.r.prefix+format.IndexFile, idx, "application/json"); err != nil {
		return rep, err
	}
	if err := writeReport(ctx, p.out, reportKey, rep); err != nil {
		return rep, err
	}
	if err := removeJournal(ctx, p.out, p.r.prefix, len(p.infos)); err != nil {
		return rep, err
	}
	if p.r.Part.Count > 1 {
		if _, err := combineReports(ctx, p.out, p.r.Part.Count); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (p *pipeline) columns() []input.Column {
	out := make([]input.Column, len(p.lay.cols))
	for i, c := range p.lay.cols {
		out[i] = input.Column{Name: c.name, Encoding: c.enc.String()}
	}
	return out
}
