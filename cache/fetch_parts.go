package cache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// A fetch's temporary files are reserved by its admission under a limit:
// their room is counted and they are created under the directory lock
// (see newPart), before the fetch may download. In a cache without a
// limit, where no room is waited for and nothing is refused, the
// admission only names them, and the fetch counts and creates them under
// one hold of the directory lock while its download runs (startParts):
// creating a file costs 0.1-0.8 ms on a busy ext4 (allocating its inode,
// waiting for the journal beside another shard's sync), and a hold of the
// directory lock waits for every other holder (another shard's rename or
// creation: up to 25-86 ms traced at load 5-10 on BenchmarkColdS3); both
// had stood between a shard's admission and its GET (traced on
// BenchmarkColdS3FirstSample: between the index's GET and the first
// shard's, and before each next GET of a pass).
//
// A part is still created before its shard can be read early (ready),
// and under the directory lock, in the same hold that counts its bytes:
// a recount, which deletes the temporary files that no live writer holds
// locked, never runs between its creation and its lock, nor between its
// creation and its count. What the deferral changes is what another
// process sees meanwhile: a download without its room counted yet, as if
// it had begun a moment later. A process without a limit never waits for
// room, so one with a limit that shares the directory cannot rely on its
// downloads' timing anyway; only a process with a limit acts on the
// count, and this one has none.

// newPart creates rel's temporary file of size bytes at its full size,
// locked, and adds it to parts. Call under the directory lock, under a
// limit (without one the parts are named only: see reserveParts).
func (d *Dataset) newPart(parts *[]*part, rel string, size int64) error {
	p := &part{rel: rel, size: size}
	if err := d.createPart(p); err != nil {
		return err
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

// startParts counts and creates the parts of parts that the admission
// only named (a cache without a limit), under one hold of the directory
// lock: on a goroutine of its own with background set, else before it
// returns. The returned func waits for the creation and returns its error
// (the same on every call); the caller calls it before it touches a
// part's file and before it returns. On an error no part of it is left
// created or counted.
func (d *Dataset) startParts(ctx context.Context, parts []*part, background bool) (wait func() error, err error) {
	var todo []*part
	for _, p := range parts {
		if p.f == nil && !p.counted {
			todo = append(todo, p)
		}
	}
	create := func() error {
		if len(todo) == 0 {
			return nil
		}
		return d.c.locked(ctx, func() (err error) {
			defer func() {
				if err != nil { // undo, still under the directory lock
					for _, p := range todo {
						if p.f != nil {
							os.Remove(d.path(p.rel) + partSuffix)
							p.f.Close()
							p.f = nil
						}
					}
				}
			}()
			// The count is read before the files are made: a recount due
			// since Open (see readUsage) must not see them, whose bytes
			// are added below.
			if _, err := d.c.readUsage(); err != nil {
				return err
			}
			var n int64
			for _, p := range todo {
				if err := d.createPart(p); err != nil {
					return fmt.Errorf("cache: create %s: %w", d.where(p.rel), err)
				}
				n += p.size
			}
			if err := d.c.addUsage(n); err != nil {
				return err
			}
			for _, p := range todo {
				p.counted = true
			}
			return nil
		})
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
