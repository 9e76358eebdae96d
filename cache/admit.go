package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// admission is a fetch's claim on its shard, taken in steps: the shard's
// fetch lock (its lock file's exclusive flock: one fetcher per node),
// what is missing once it is held, and the reservation of the temporary
// files for it. Under a limit Dataset.start takes what it can at once, on
// the caller's goroutine, so that whether a prefetch is admitted
// (reserved, or refused for room) depends on the order in which the walk
// asks and on the cache's state, not on when the flight's goroutine gets
// to run; the flight's goroutine takes the rest (waiting for another
// process's fetch, or for room on demand) and downloads. Without a limit,
// where nothing is refused, the flight's goroutine takes it all, and the
// reservation only names the temporary files (see startParts).
type admission struct {
	lf     *os.File // the shard's lock file (nil: not opened)
	locked bool     // lf's exclusive flock is held
	// other is set when another process held the fetch lock and the shard
	// was complete when it let go: nothing is left to do.
	other bool
	steps []step  // what is missing, planned with the lock held
	parts []*part // the reserved temporary files (nil: not reserved)
	// done is set once nothing is left to claim: the parts are reserved,
	// or nothing is missing.
	done bool
}

// close lets go of the fetch lock.
func (a *admission) close() {
	if a.lf != nil {
		a.lf.Close()
		a.lf = nil
	}
}

// admit advances a, shard's admission for a fetch distance samples ahead
// of its consumer (demand: the consumer waits for it). With wait, it waits
// for another process's fetch of the shard and, on demand, for room, up to
// ctx's deadline; without, it takes only what is free now and leaves the
// rest to a later call with wait, except that a prefetch refused for room
// fails at once (ErrNoSpace) either way. On an error a holds nothing.
func (d *Dataset) admit(ctx context.Context, a *admission, shard int, distance int64, demand, wait bool) (err error) {
	if a.done {
		return nil
	}
	files := d.src.Shards[shard].Files
	defer func() {
		if err != nil {
			a.close()
			a.locked = false
		}
	}()
	if a.lf == nil {
		steps, err := d.plan(shard)
		if err != nil {
			return err
		}
		if len(steps) == 0 {
			a.done = true
			return nil
		}
		lf, err := os.OpenFile(d.lockPath(shard), os.O_RDWR|os.O_CREATE, d.c.opts.fileMode())
		if err != nil {
			return fmt.Errorf("cache: fetch %s: %w", d.where(files[0].Raw), err)
		}
		a.lf = lf
	}
	if !a.locked {
		bo := newBackoff(time.Millisecond, 50*time.Millisecond)
		for {
			ok, err := tryLock(a.lf, true)
			if err != nil {
				return fmt.Errorf("cache: fetch %s: %w", d.where(files[0].Raw), err)
			}
			if ok {
				break
			}
			// Another process is fetching it: wait for its result.
			if d.Present(shard) {
				a.other, a.done = true, true
				return nil
			}
			if !wait {
				return nil
			}
			if err := bo.wait(ctx, nil); err != nil {
				return fmt.Errorf("cache: waiting for another process to fetch %s (lock %s%s): %w", d.where(files[0].Raw), a.lf.Name(), holders(a.lf), err)
			}
		}
		a.locked = true
		if a.steps, err = d.plan(shard); err != nil {
			return err
		}
		if len(a.steps) == 0 {
			a.done = true
			return nil
		}
	}
	parts, err := d.reserveParts(ctx, shard, a.steps, distance, demand, wait)
	if errors.Is(err, errNoRoom) {
		return nil // on demand without wait: the flight waits for room
	}
	if err != nil {
		return err
	}
	a.parts, a.done = parts, true
	return nil
}

// reserveParts reserves room for the files steps write (a compressed file
// downloaded counts beside its raw form) and creates their temporary
// files, locked, under the same hold of the directory lock. A demand
// reservation without wait that finds no room returns errNoRoom. Without
// a limit it only names them: the fetch counts and creates them
// (startParts).
func (d *Dataset) reserveParts(ctx context.Context, shard int, steps []step, distance int64, demand, wait bool) ([]*part, error) {
	if d.c.opts.Limit == 0 {
		// Without a limit the room waits for nothing and nobody is
		// refused: the parts are only named here, and counted when the
		// fetch creates them (startParts), off the download's path.
		var parts []*part
		for _, s := range steps {
			if s.download && s.inflate {
				parts = append(parts, &part{rel: s.file.Zip, size: s.file.ZipBytes})
			}
			parts = append(parts, &part{rel: s.file.Raw, size: s.file.RawBytes})
		}
		return parts, nil
	}
	var need int64
	for _, s := range steps {
		if s.inflate {
			need += s.file.RawBytes
			if s.download {
				need += s.file.ZipBytes
			}
		} else {
			need += s.file.RawBytes
		}
	}
	var parts []*part
	create := func() (err error) {
		defer func() {
			if err != nil { // undo, still under the directory lock
				for _, p := range parts {
					os.Remove(d.path(p.rel) + partSuffix)
					p.f.Close()
				}
				parts = nil
			}
		}()
		for _, s := range steps {
			if s.download && s.inflate {
				if err := d.newPart(&parts, s.file.Zip, s.file.ZipBytes); err != nil {
					return err
				}
			}
			if err := d.newPart(&parts, s.file.Raw, s.file.RawBytes); err != nil {
				return err
			}
		}
		return nil
	}
	if err := d.c.reserveWait(ctx, need, distance, demand, wait, d, shard, create); err != nil {
		if errors.Is(err, errNoRoom) {
			return nil, err
		}
		return nil, fmt.Errorf("cache: fetch %s: %w", d.where(d.src.Shards[shard].Files[0].Raw), err)
	}
	for _, p := range parts {
		p.counted = true
	}
	return parts, nil
}
