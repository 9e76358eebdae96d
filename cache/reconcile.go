package cache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// settleDelay is how long after a registration its pass over the files on
// disk waits for a hold of the directory lock to run it: a job's first
// batch (tens of ms after the registration of a 40k-shard dataset) does
// not share the node's CPU with the pass's 40k stats. Anything that needs
// the count or changes the directory runs it at once (see settle).
const settleDelay = time.Second

// settleLater runs the pending registrations' pass settleDelay after the
// first of them, unless a hold of the directory lock has run it before or
// the Cache is closed. It runs on its own goroutine, counted in c.wg.
func (c *Cache) settleLater() {
	defer c.wg.Done()
	t := time.NewTimer(settleDelay)
	defer t.Stop()
	select {
	case <-c.bg.Done():
		return
	case <-t.C:
	}
	c.mu.Lock()
	c.settleSoon = false
	due := len(c.pending) > 0
	c.mu.Unlock()
	if due {
		_ = c.locked(c.bg, func() error { return nil }) // the hold settles them
	}
}

// settle runs, at the start of every hold of the directory lock (before
// the holder reads the count or changes a file), the pass over the files
// on disk of the datasets registered since the last hold: reconcile, and
// the recount of the root in the same pass. So the count is exact before
// any reservation (the limit is never exceeded while it is unknown), and
// the pass and the recount are one step under the lock, as a recount
// must be (a hold that changes files and then adds their bytes must not
// see a recount in between). A failed pass leaves the count as it was
// (exact, or rebuilt by readUsage when a recount is still due since Open)
// and its error for Reconcile. Call under the directory lock.
func (c *Cache) settle() {
	c.mu.Lock()
	pend := c.pending
	c.pending = nil
	c.mu.Unlock()
	if len(pend) == 0 {
		return
	}
	var sum int64
	var failed error
	for _, d := range pend {
		n, on, err := d.reconcile()
		c.mu.Lock()
		d.settled, d.settleErr = true, err
		if err == nil {
			// Merged, not assigned: a fetch may have ended meanwhile.
			for i, ok := range on {
				if ok {
					d.sawOnDisk(i)
				}
			}
			d.diskKnown = true
		}
		c.mu.Unlock()
		sum += n
		if err != nil {
			failed = err
		}
	}
	if failed != nil {
		return
	}
	var total int64
	if d := pend[0]; len(pend) == 1 {
		// The dataset's directory was summed by reconcile; the rest of
		// the root is summed here.
		total = sum
		if d.dir != c.dir {
			rest, _, err := scanDir(c.dir, true, d.dir, nil)
			if err != nil {
				return
			}
			total += rest
		}
	} else {
		// Rare (several datasets registered at once), and their
		// directories may nest: sum the root again.
		n, err := sumDir(c.dir, true)
		if err != nil {
			return
		}
		total = n
	}
	if c.writeUsage(total) == nil {
		c.recountDue = false // total is the recount
	}
}

// Reconcile runs the registration's pass over the dataset's files on disk
// now if it has not run yet (see Add), and returns its error: a file it
// could not read or delete. The dataset stays usable after an error (its
// shards are checked as they are opened), and the byte count stays as it
// was: exact, or, when no recount has run since Open, rebuilt by the next
// reservation.
func (d *Dataset) Reconcile(ctx context.Context) error {
	c := d.c
	c.mu.Lock()
	done, err := d.settled, d.settleErr
	c.mu.Unlock()
	if done {
		return err
	}
	// Add queued the pass before it returned d, so this hold runs it,
	// or waits for the hold that does.
	if err := c.locked(ctx, func() error { return nil }); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !d.settled {
		return fmt.Errorf("cache %s: dataset %q: registration pass did not run", c.dir, d.src.Dir)
	}
	return d.settleErr
}

// reconcile applies the size check and keep_zip rule to files already on
// disk, and returns the total size of the files under the dataset's
// directory afterwards (as recount sums them; the cache's metadata
// directory left out when it is the root). Files someone holds locked are
// left alone. Call under the directory lock.
//
// It reads the directory once, stat'ing each file there once (the sizes
// the sum needs), and checks the shards' files against that listing: a
// 40k-shard dataset costs one stat per file present, not one per name the
// index lists (raw and compressed) plus the recount's. Files in
// subdirectories (basenames with a slash) are stat'ed by name.
func (d *Dataset) reconcile() (int64, []bool, error) {
	top := make(map[string]topFile, len(d.src.Shards))
	total, top, err := scanDir(d.dir, d.dir == d.c.dir, "", top)
	if err != nil {
		return 0, nil, fmt.Errorf("cache: %w", err)
	}
	dir, err := os.Open(d.dir)
	if err != nil {
		return 0, nil, fmt.Errorf("cache: %w", err)
	}
	defer dir.Close()
	removed := false
	check := func(rel string, want int64) (bool, error) {
		var size int64
		var ok bool
		if strings.Contains(rel, "/") {
			if size, ok, err = statAt(dir, d.dir, filepath.FromSlash(rel), true); err != nil {
				return false, fmt.Errorf("cache: %w", err)
			}
		} else {
			var f topFile
			f, ok = top[rel]
			size = f.size
		}
		if !ok {
			return false, nil
		}
		if size == want {
			return true, nil
		}
		gone, err := removeUnlocked(d.path(rel))
		removed = removed || gone
		return false, err
	}
	// on: the shards with a file of the right size left in place.
	on := make([]bool, len(d.src.Shards))
	for i, sh := range d.src.Shards {
		for _, f := range sh.Files {
			rawOK, err := check(f.Raw, f.RawBytes)
			if err != nil {
				return 0, nil, err
			}
			on[i] = on[i] || rawOK
			if f.Zip == "" {
				continue
			}
			zipOK, err := check(f.Zip, f.ZipBytes)
			if err != nil {
				return 0, nil, err
			}
			on[i] = on[i] || zipOK
			if rawOK && zipOK && !d.src.KeepZip {
				gone, err := removeUnlocked(d.path(f.Zip))
				if err != nil {
					return 0, nil, err
				}
				removed = removed || gone
			}
		}
	}
	if removed {
		// Rare (wrong sizes, or compressed files kept by another run):
		// sum the directory again.
		if total, err = sumDir(d.dir, d.dir == d.c.dir); err != nil {
			return 0, nil, fmt.Errorf("cache: %w", err)
		}
	}
	return total, on, nil
}

// removeUnlocked deletes path unless another open file holds a lock on it.
func removeUnlocked(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cache: %w", err)
	}
	defer f.Close()
	ok, err := tryLock(f, true)
	if err != nil || !ok {
		return false, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("cache: %w", err)
	}
	return true, nil
}
