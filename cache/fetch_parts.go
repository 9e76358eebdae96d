package cache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// A fetch's temporary files are reserved by its admission, under the
// directory lock: their room is counted, and under a limit they are
// created there too (see newPart). In a cache without a limit the
// admission only names them, and the fetch creates them while its
// download runs (startParts): creating a file costs 0.1-0.8 ms on a busy
// ext4 (allocating its inode, waiting for the journal beside another
// shard's sync), which had stood between a shard's admission and its
// GET (traced on BenchmarkColdS3FirstSample: between the index's GET
// and the first shard's, and before each next GET of a pass, whose
// admissions run one after another on one goroutine).
//
// A part is still created before its shard can be read early (ready),
// and under the directory lock: a recount, which deletes the temporary
// files that no live writer holds locked, never runs between its
// creation and its lock. What the deferral changes is what another
// process sees meanwhile: room counted with no file yet. A recount by
// another process in that instant counts the cache one download short
// until the next recount; only a process with a limit acts on the
// count, and this one has none.

// newPart adds rel's temporary file of size bytes to parts. Under a limit
// it creates it at its full size and locks it; without, it only names it
// (see startParts). Call under the directory lock.
func (d *Dataset) newPart(parts *[]*part, rel string, size int64) error {
	p := &part{rel: rel, size: size}
	if d.c.opts.Limit > 0 {
		if err := d.createPart(p); err != nil {
			return err
		}
	}
	*parts = append(*parts, p)
	return nil
}

// createPart creates p's temporary file at its full size and locks it.
// Call under the directory lock.
func (d *Dataset) createPart(p *part) error {
	path := d.path(p.rel) + partSuffix
	if err := os.MkdirAll(filepath.Dir(path), d.c.opts.dirMode()); err != nil {
		return err
	}
	// A leftover part here belongs to a dead process: we hold the shard's
	// fetch lock. Its bytes were counted; the next recount settles that.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, d.c.opts.fileMode())
	if err != nil {
		return err
	}
	ok, err := tryLock(f, true)
	if err == nil && !ok {
		err = fmt.Errorf("%s is locked by another process", path)
	}
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		err = f.Truncate(p.size)
	}
	if err != nil {
		f.Close()
		return err
	}
	p.f = f
	return nil
}

// startParts creates the parts of parts that the admission only named,
// under the directory lock: on a goroutine of its own with background
// set, else before it returns. The returned func waits for the creation
// and returns its error (the same on every call); the caller calls it
// before it touches a part's file and before it returns.
func (d *Dataset) startParts(ctx context.Context, parts []*part, background bool) (wait func() error, err error) {
	var todo []*part
	for _, p := range parts {
		if p.f == nil {
			todo = append(todo, p)
		}
	}
	create := func() error {
		if len(todo) == 0 {
			return nil
		}
		err := d.c.locked(ctx, func() error {
			for _, p := range todo {
				if err := d.createPart(p); err != nil {
					return fmt.Errorf("cache: create %s: %w", d.where(p.rel), err)
				}
			}
			return nil
		})
		return err
	}
	if !background || len(todo) == 0 {
		err := create()
		return func() error { return err }, err
	}
	var (
		once sync.Once
		done = make(chan struct{})
		cerr error
	)
	go func() {
		defer close(done)
		cerr = create()
	}()
	return func() error {
		once.Do(func() { <-done })
		return cerr
	}, nil
}
