package cache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// openLeased opens the shard's first raw file with a shared lock if the
// shard is complete on disk, or returns nil if it is not. Without wait, it
// also returns nil when the file is locked exclusively.
func (d *Dataset) openLeased(ctx context.Context, shard int, wait bool) (*os.File, error) {
	files := d.src.Shards[shard].Files
	p := d.path(files[0].Raw)
	for {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cache: open %s: %w", d.where(files[0].Raw), err)
		}
		// An exclusive holder is evicting it or has just renamed it into
		// place; both finish promptly.
		ok, err := tryLock(f, false)
		if err == nil && !ok && wait {
			lctx, cancel := context.WithTimeout(ctx, d.c.opts.WaitTimeout)
			err = lockWait(lctx, f, false)
			cancel()
			ok = err == nil
		}
		if err != nil || !ok {
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("cache: lease %s: %w", d.where(files[0].Raw), err)
			}
			return nil, nil
		}
		fi, same, err := sameFile(f, p)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("cache: lease %s: %w", d.where(files[0].Raw), err)
		}
		if !same {
			f.Close()
			continue // evicted or replaced meanwhile; look again
		}
		if fi.Size() != files[0].RawBytes {
			f.Close()
			if !d.remote {
				return nil, fmt.Errorf("cache: %s has %d bytes, the index says %d", d.where(files[0].Raw), fi.Size(), files[0].RawBytes)
			}
			return nil, nil
		}
		for _, rf := range files[1:] {
			fi, err := os.Stat(d.path(rf.Raw))
			if err != nil || fi.Size() != rf.RawBytes {
				f.Close()
				return nil, nil
			}
		}
		return f, nil
	}
}
