package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/retry"
)

// part is a temporary file being written, reserved at its full size and
// held with an exclusive lock until renamed or removed.
type part struct {
	rel  string // final relative path
	size int64
	f    *os.File
	done bool // renamed into place (its bytes now belong to a final file)
	// counted is set once the part's bytes are added to the cache's
	// count: by its admission under a limit, with its creation without
	// one (see startParts).
	counted bool
}

// step is one file's work within a fetch.
type step struct {
	file     File
	download bool // download Zip (if set) or Raw
	inflate  bool // decompress Zip into Raw
}

// plan returns what is missing for shard: nil when it is complete.
func (d *Dataset) plan(shard int) ([]step, error) {
	var steps []step
	for _, f := range d.src.Shards[shard].Files {
		ok, err := d.exists(f.Raw, f.RawBytes)
		if err != nil {
			return nil, err
		}
		if ok {
			continue
		}
		s := step{file: f}
		if f.Zip == "" {
			s.download = true
		} else {
			s.inflate = true
			zok, err := d.exists(f.Zip, f.ZipBytes)
			if err != nil {
				return nil, err
			}
			s.download = !zok
		}
		if s.download && !d.remote {
			rel := f.Raw
			if f.Zip != "" {
				rel = f.Zip
			}
			return nil, fmt.Errorf("%w: %s", ErrNotLocal, d.where(rel))
		}
		steps = append(steps, s)
	}
	return steps, nil
}

func (d *Dataset) exists(rel string, size int64) (bool, error) {
	fi, err := os.Stat(d.path(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cache: %w", err)
	}
	return fi.Size() == size, nil
}

// fetch makes shard complete on disk. It runs on a flight goroutine,
// taking what a (the admission Dataset.start began on the caller's
// goroutine; nil: none) does not hold yet: the shard's fetch lock, then
// the reservation of its temporary files.
// When it writes every raw file of the shard, it calls ready (if not nil)
// with their temporary paths once their bytes are complete and verified,
// before syncing and renaming them.
//
// On success with the shard's fetch lock held, it pins the shard for fl's
// waiters (see pin) before letting go of that lock.
func (d *Dataset) fetch(ctx context.Context, shard int, distance int64, demand bool, fl *flight, a *admission, ready func(paths []string)) (err error) {
	files := d.src.Shards[shard].Files
	if a == nil {
		a = &admission{}
	}
	// Cross-process single flight: one fetcher per shard per node.
	defer a.close()
	// Runs before the lock's close: no other process evicts the shard
	// until then.
	defer func() {
		if err == nil && a.lf != nil && d.Present(shard) {
			d.pin(ctx, shard, fl)
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, d.c.opts.WaitTimeout)
	defer cancel()
	if err := d.admit(wctx, a, shard, distance, demand, true); err != nil || a.parts == nil {
		return err // failed, or nothing is missing (any more)
	}
	steps, parts := a.steps, a.parts
	var committed int64 // reserved bytes that now belong to final files
	defer func() {
		if err != nil {
			d.discard(parts, committed)
		}
	}()
	byRel := make(map[string]*part, len(parts))
	for _, p := range parts {
		byRel[p.rel] = p
	}
	// Write every file first: once the raw bytes are all complete (and
	// verified) in their temporary files, a consumer may read them while
	// the files are synced and renamed into place.
	zparts := make([]*part, len(steps)) // downloaded compressed files
	var blk []byte                      // the block a shard fetched in memory is downloaded into
	if len(files) == 1 && len(steps) == 1 && !steps[0].inflate && ready != nil &&
		d.src.InMemory != nil && d.src.InMemory(shard) {
		blk = d.c.memGet(files[0].RawBytes)
	}
	var m *memShard
	defer func() {
		if err != nil {
			d.memFailed(blk, m)
		}
	}()
	// The temporary files the admission only named (newPart) are created
	// now: while a shard fetched in memory downloads, else before.
	created, err := d.startParts(ctx, parts, blk != nil)
	if err != nil {
		return err
	}
	// The writes behind (an index's, WriteFileBehind; a manifest's)
	// begin with the Cache's first download, or once its bytes are in
	// where it is fetched in memory (see firstDownload).
	if blk == nil {
		d.c.behind.firstDownload()
	} else {
		defer d.c.behind.firstDownload() // also when the download fails
	}
	defer func() {
		if cerr := created(); err == nil {
			err = cerr
		}
	}()
	for k, s := range steps {
		f := s.file
		if !s.inflate {
			if err := d.download(ctx, f.Raw, byRel[f.Raw], d.checks(shard, f), blk); err != nil {
				return err
			}
			continue
		}
		if s.download {
			zparts[k] = byRel[f.Zip]
			if err := d.download(ctx, f.Zip, zparts[k], d.checks(shard, f), nil); err != nil {
				return err
			}
		}
		if err := d.inflate(f, zparts[k], byRel[f.Raw]); err != nil {
			return err
		}
	}
	d.c.behind.firstDownload()
	if err := created(); err != nil {
		return err
	}
	var first *part // the first raw file's part, kept open for the lock hand-off
	if ready != nil && len(steps) == len(files) {
		paths := make([]string, len(steps))
		for k, s := range steps {
			paths[k] = d.path(s.file.Raw) + partSuffix
		}
		first = byRel[files[0].Raw]
		if blk != nil {
			m = d.keepFetched(shard, fl, blk, first.size)
		}
		ready(paths)
		if d.c.opts.Limit == 0 {
			// ready woke the shard's early readers and started the
			// fetches that its end freed a slot for: they wait in this
			// goroutine's run queue. The syncs below block in the kernel
			// while holding this goroutine's processor, and the runtime
			// hands that processor to them only after 10-20 ms or when
			// the syncs end (traced on BenchmarkColdS3: each next
			// download started, and the consumer got the shard, only
			// after the previous shard's sync and rename, 10-27 ms
			// later). Let them run first. (Under a limit the consumer
			// reads the shard once it is committed: the commit goes
			// first.)
			runtime.Gosched()
		}
		if m != nil {
			// The leases read m meanwhile; the file gets the same bytes.
			_, werr := d.writeFile(first, m.buf)
			d.fileWritten(fl, m)
			if werr != nil {
				return werr
			}
		}
		if h := d.c.beforeCommit; h != nil {
			h(shard)
		}
	}
	for k, s := range steps {
		f := s.file
		p := byRel[f.Raw]
		if err := d.commit(p, p == first); err != nil {
			return err
		}
		committed += p.size
		if !s.inflate {
			continue
		}
		zpart := zparts[k]
		if d.src.KeepZip {
			if zpart != nil {
				if err := d.commit(zpart, false); err != nil {
					return err
				}
				committed += zpart.size
			}
			continue
		}
		err := d.c.locked(context.WithoutCancel(ctx), func() error {
			if zpart != nil {
				zpart.done = true
				committed += zpart.size // its bytes are returned here, not by discard
				os.Remove(d.path(f.Zip) + partSuffix)
				zpart.f.Close()
				return d.c.addUsage(-f.ZipBytes)
			}
			if rmErr := os.Remove(d.path(f.Zip)); rmErr == nil {
				return d.c.addUsage(-f.ZipBytes)
			} else if !errors.Is(rmErr, fs.ErrNotExist) {
				return rmErr
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("cache: remove %s: %w", d.where(f.Zip), err)
		}
	}
	if first != nil {
		return d.handOff(shard, first)
	}
	return nil
}

// discard removes unfinished parts and returns their reservation, less
// the committed bytes that now live in final files.
func (d *Dataset) discard(parts []*part, committed int64) {
	var reserved int64
	for _, p := range parts {
		if p.counted {
			reserved += p.size
		}
	}
	_ = d.c.locked(context.Background(), func() error {
		for _, p := range parts {
			if !p.done {
				os.Remove(d.path(p.rel) + partSuffix)
				p.f.Close()
			}
		}
		if len(parts) == 0 {
			return nil
		}
		return d.c.addUsage(-(reserved - committed))
	})
	d.c.signal()
}

// commit syncs a finished part and renames it into place under the
// directory lock (so a recount never sees it twice or not at all). With
// keep, the part's file stays open and exclusively locked (see handOff).
func (d *Dataset) commit(p *part, keep bool) error {
	if err := p.f.Sync(); err != nil {
		return fmt.Errorf("cache: sync %s: %w", d.where(p.rel), err)
	}
	// Not in place before the index it belongs to (WriteFileBehind). Not
	// cut short by Close, which waits for that write (its room is
	// reserved: it ends), so that a shard read early is not discarded by
	// a Close that came during the index's sync.
	if err := d.c.waitBehind(context.WithoutCancel(d.c.bg), d.path(p.rel)); err != nil {
		return fmt.Errorf("cache: commit %s: waiting for the files it belongs to: %w", d.where(p.rel), err)
	}
	err := d.c.locked(context.Background(), func() error {
		return os.Rename(d.path(p.rel)+partSuffix, d.path(p.rel))
	})
	if err != nil {
		return fmt.Errorf("cache: commit %s: %w", d.where(p.rel), err)
	}
	p.done = true
	if keep {
		return nil
	}
	return p.f.Close() // drops the exclusive lock
}

// handOff ends the early access to a shard whose first raw file p has just
// been renamed into place, still open with its exclusive lock: it
// downgrades that lock to a shared one, gives the in-process leases' file
// (opened under the temporary name: the same inode) a shared lock too and
// only then closes p, so that no other process can evict the shard in
// between.
func (d *Dataset) handOff(shard int, p *part) error {
	defer p.f.Close()
	// Converting an exclusive flock to a shared one on the same open
	// file cannot conflict and is atomic on Linux.
	if ok, err := tryLock(p.f, false); err != nil || !ok {
		if err == nil {
			err = errors.New("shared lock refused while holding the exclusive one")
		}
		return fmt.Errorf("cache: lease %s: %w", d.where(p.rel), err)
	}
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &d.st[shard]
	if st.flight != nil {
		st.flight.handedOff = true
	}
	early := st.early
	st.early = false
	if !early || st.f == nil {
		return nil
	}
	ok, err := tryLock(st.f, false)
	if err == nil && !ok {
		err = errors.New("shared lock refused while holding one")
	}
	if err != nil {
		return fmt.Errorf("cache: lease %s: %w", d.where(p.rel), err)
	}
	return nil
}

// written returns a channel closed once the flight's raw files are
// complete in their temporary files (ready) or the flight ended, and its
// error: the flight's once it ended, nil before (see Via.Prefetch).
func (fl *flight) written() (<-chan struct{}, func() error) {
	ch := make(chan struct{})
	go func() {
		select {
		case <-fl.ready:
		case <-fl.done:
		}
		close(ch)
	}()
	return ch, func() error {
		select {
		case <-fl.done:
			return fl.err // set before done is closed
		default:
			return nil
		}
	}
}

// whenWritten calls fn once fl's raw files are complete in their
// temporary files (with nil) or fl ended (with its error), whichever is
// first: at once when that is past, else from the flight's goroutine.
func (d *Dataset) whenWritten(fl *flight, fn func(error)) {
	c := d.c
	c.mu.Lock()
	select {
	case <-fl.done:
		err := fl.err
		c.mu.Unlock()
		fn(err)
		return
	default:
	}
	select {
	case <-fl.ready:
		c.mu.Unlock()
		fn(nil)
		return
	default:
	}
	fl.notify = append(fl.notify, fn)
	c.mu.Unlock()
}

// takeNotify returns and clears fl's pending whenWritten functions; call
// under Cache.mu, and call them after unlocking it.
func (fl *flight) takeNotify() []func(error) {
	fns := fl.notify
	fl.notify = nil
	return fns
}

// parallelThreshold is the size from which a file is fetched in parallel
// ranged parts of partSize bytes, up to partConcurrency at once.
const (
	parallelThreshold = 32 << 20
	partSize          = 8 << 20
	partConcurrency   = 4
)

// download fetches rel from the bucket into p with Attempts tries, each
// bounded by AttemptTimeout, then runs each of checks over its bytes.
// With blk set, the bytes go to blk instead of p's file (see memGet).
func (d *Dataset) download(ctx context.Context, rel string, p *part, checks []func(io.Reader) error, blk []byte) error {
	var dst io.WriterAt
	var src io.ReaderAt
	if blk != nil {
		dst, src = blockWriter(blk), bytes.NewReader(blk[:p.size])
	} else {
		// Not read with blk set: a shard fetched in memory has its file
		// created meanwhile (see startParts).
		dst, src = p.f, p.f
	}
	var err error
	for i := 1; i <= d.src.Attempts; i++ {
		if i > 1 {
			t := time.NewTimer(d.src.Backoff(i - 1))
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("cache: download %s: %w (after: %w)", d.where(rel), ctx.Err(), err)
			case <-t.C:
			}
		}
		actx, cancel := context.WithTimeout(ctx, d.src.AttemptTimeout)
		err = d.getInto(actx, rel, p.size, dst)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || final(err) {
			return fmt.Errorf("cache: download %s: %w", d.where(rel), err)
		}
	}
	if err != nil {
		return fmt.Errorf("cache: download %s: %d attempts failed, last: %w", d.where(rel), d.src.Attempts, err)
	}
	d.c.stats.downloads.Add(1)
	d.stats.downloads.Add(1)
	d.c.stats.bytesFetched.Add(p.size)
	d.stats.bytesFetched.Add(p.size)
	for _, verify := range checks {
		if err := verify(io.NewSectionReader(src, 0, p.size)); err != nil {
			return fmt.Errorf("cache: validate %s: %w", d.where(rel), err)
		}
	}
	return nil
}

// final reports whether a download error is one another attempt cannot
// change: a missing or refused object, a size that differs from the index
// (corruption, not a transient fault), or a store decorator's retry budget
// already spent on this attempt.
func final(err error) bool {
	var spent *retry.Error
	return errors.Is(err, storage.ErrNotExist) || errors.Is(err, storage.ErrPermission) ||
		errors.Is(err, format.ErrCorrupt) || errors.As(err, &spent)
}

// getInto writes the whole object rel (size bytes) into w, checking its
// size.
func (d *Dataset) getInto(ctx context.Context, rel string, size int64, w io.WriterAt) error {
	b := d.src.Bucket
	if v, ok := ctx.Value(viaKey{}).(storage.Bucket); ok {
		b = v
	}
	if size < parallelThreshold {
		return getRange(ctx, b, rel, w, 0, size, true, nil)
	}
	g, gctx := errgroup.WithContext(ctx)
	sum := startRangeSum(gctx, b, rel, size) // see rangesum.go
	g.SetLimit(partConcurrency)
	for off := int64(0); off < size; off += partSize {
		n := min(partSize, size-off)
		g.Go(func() error { return getRange(gctx, b, rel, w, off, n, off+n == size, sum) })
	}
	err := g.Wait()
	if verr := sum.verify(b.URL(rel)); err == nil {
		err = verr
	}
	return err
}

// getRange copies n bytes at off of object key into f at the same offset.
// With last, it also checks that the object ends there. With sum, the
// bytes are summed for the check of the whole object (rangesum.go).
func getRange(ctx context.Context, b storage.Bucket, key string, f io.WriterAt, off, n int64, last bool, sum *rangeSum) error {
	want := n
	switch {
	case last && off == 0:
		want = -1 // the whole object: a longer one is noticed, and its checksum checked
	case last:
		// One byte more notices a longer object. A read to the end from
		// an offset would cost a Stat first (storage.SettleRange).
		want = n + 1
	}
	body, err := b.NewRangeReader(ctx, key, off, want)
	if err != nil {
		return err
	}
	defer body.Close()
	var r io.Reader = body
	if sum != nil {
		if r, err = sum.reader(ctx, body, off); err != nil {
			return err
		}
	}
	var got int64
	if blk, ok := f.(blockWriter); ok {
		// Straight into the block: no copy through a buffer. A range
		// other than the last stops where the next one begins.
		end := off + n
		if last {
			end++ // the byte that notices a longer object
		}
		got, err = fillBlock(blk[off:end], io.LimitReader(r, n+1))
	} else {
		buf := copyBufs.Get().(*[]byte)
		defer copyBufs.Put(buf)
		got, err = fillCopyAt(f, off, io.LimitReader(r, n+1), *buf)
	}
	if err != nil {
		return err
	}
	if got != n {
		return &format.CorruptError{File: b.URL(key), Shard: -1, Sample: -1, Offset: off,
			Reason: fmt.Sprintf("got %d bytes at offset %d, want %d (size in the index differs from the store)", got, off, n)}
	}
	return nil
}

// fillCopyAt copies r into f from offset off until r ends, and returns the
// number of bytes copied. It fills buf before each write: a socket hands
// out a few tens of KiB per read, and one pwrite per buffer (1 MiB) rather
// than per read saves most of the system calls of a download.
func fillCopyAt(f io.WriterAt, off int64, r io.Reader, buf []byte) (int64, error) {
	var got int64
	for {
		// Not io.ReadFull: it reports a body that ends early as
		// io.ErrUnexpectedEOF, which is also how a reader says that its
		// body broke (a retryable truncation, not the object's end).
		n, rerr := 0, error(nil)
		for n < len(buf) && rerr == nil {
			var m int
			m, rerr = r.Read(buf[n:])
			n += m
		}
		if n > 0 {
			if _, err := f.WriteAt(buf[:n], off+got); err != nil {
				return got, err
			}
			got += int64(n)
		}
		if rerr == io.EOF {
			return got, nil
		}
		if rerr != nil {
			return got, rerr
		}
	}
}

// copyBufs holds the download copy buffers.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// inflate decompresses f.Zip into p, checking the output size.
// The compressed bytes come from zpart when it is set, else from the
// compressed file in place.
func (d *Dataset) inflate(f File, zpart *part, p *part) error {
	var zf *os.File
	if zpart != nil {
		zf = zpart.f
	} else {
		var err error
		if zf, err = os.Open(d.path(f.Zip)); err != nil {
			return fmt.Errorf("cache: decompress %s: %w", d.where(f.Zip), err)
		}
		defer zf.Close()
	}
	w := &limitWriter{w: io.NewOffsetWriter(p.f, 0), left: f.RawBytes}
	if err := d.src.Decompress(f.Compression, w, io.NewSectionReader(zf, 0, f.ZipBytes), f.RawBytes); err != nil {
		return fmt.Errorf("cache: decompress %s: %w", d.where(f.Zip), err)
	}
	if w.left != 0 {
		return fmt.Errorf("cache: decompress %s: got %d bytes, the index says %d", d.where(f.Zip), f.RawBytes-w.left, f.RawBytes)
	}
	return nil
}

// limitWriter fails writes past left bytes (a corrupt or hostile
// compressed file must not fill the disk).
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > l.left {
		return 0, fmt.Errorf("decompressed data exceeds the declared size")
	}
	n, err := l.w.Write(b)
	l.left -= int64(n)
	return n, err
}
