package cache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"
)

// Future tells the cache when a consumer will next use shards, so that
// eviction can follow the plan (Belady's rule).
type Future interface {
	// NextUses calls fn for shards the consumer will read within its look-
	// ahead, with the distance in samples from its current position to the
	// first use (0: in use now). Unreported shards count as not planned.
	// It is called on the cache's eviction path and must not call into the
	// Cache or block.
	NextUses(fn func(d *Dataset, shard int, distance int64))
}

// Pinner is implemented by a Future whose consumer holds shards it fetched
// ahead of itself until it leases them: a DataLoader worker taking turns
// (stream.Options.OrderAdmissions) pins each shard its walk fetches from
// the fetch's admission until its own turn at that shard leases it, so
// that the shard is never an eviction candidate in between. Without the
// pin a prefetched shard becomes a candidate when its download ends (one
// in flight is none), so whether another worker's shard change may evict
// it depends on that time, not on the plan. A worker's pins are within its
// prefetch budget, which the cache limit holds beside every worker's
// current shard and fetch.
type Pinner interface {
	// Pinned calls fn for every shard the consumer pins now. It is
	// called on the cache's eviction path and must not call into the
	// Cache or block.
	Pinned(fn func(d *Dataset, shard int))
}

type futureReg struct{ f Future }

// AddFuture registers a consumer's future; call the returned func to
// remove it when the consumer ends.
func (c *Cache) AddFuture(f Future) (remove func()) {
	r := &futureReg{f: f}
	c.mu.Lock()
	c.futures[r] = struct{}{}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.futures, r)
		c.mu.Unlock()
	}
}

// errNoRoom is reserve's internal "does not fit now".
var errNoRoom = errors.New("no room")

// reserve adds n bytes to the directory's count, evicting as needed, and
// runs create under the same lock hold (so the reserved temporary files
// appear atomically with the count). A demand reservation waits for space
// up to ctx's deadline; a prefetch fails with ErrNoSpace at once.
func (c *Cache) reserve(ctx context.Context, n, distance int64, demand bool, d *Dataset, shard int, create func() error) error {
	return c.reserveWait(ctx, n, distance, demand, true, d, shard, create)
}

// reserveWait is reserve; a demand reservation without wait that finds no
// room returns errNoRoom instead of waiting.
func (c *Cache) reserveWait(ctx context.Context, n, distance int64, demand, wait bool, d *Dataset, shard int, create func() error) error {
	lim := c.opts.Limit
	if lim > 0 && n > lim {
		return &LimitError{Dir: c.dir, Limit: lim, Min: n, Reason: fmt.Sprintf("%d bytes must be held at once (a shard's raw and compressed forms, or an index file)", n)}
	}
	if !demand {
		// A prefetch needed no sooner than one just refused, with nothing
		// changed since in this process, is refused without a rescan.
		c.mu.Lock()
		refused := c.refusals.Refused(c.gen, distance)
		c.mu.Unlock()
		if refused {
			return fmt.Errorf("%w: prefetch needs %d bytes; shards needed sooner fill the cache", ErrNoSpace, n)
		}
	}
	bo := newBackoff(time.Millisecond, 100*time.Millisecond)
	var usage int64
	for {
		wake := c.wakeChan()
		c.mu.Lock()
		gen := c.gen
		c.mu.Unlock()
		err := c.locked(ctx, func() error {
			if lim == 0 {
				// Read the count before create: a recount due since
				// Open (see readUsage) must not see create's temporary
				// files, whose bytes are added below.
				if _, err := c.readUsage(); err != nil {
					return err
				}
				if err := create(); err != nil {
					return err
				}
				return c.addUsage(n)
			}
			u, err := c.readUsage()
			if err != nil {
				return err
			}
			if u+n > lim {
				u -= c.evict(u+n-lim, distance, demand, d, shard)
				if u+n > lim && demand {
					// The counter may still hold reservations of dead
					// processes: recount the directory and try again.
					if u, err = c.recount(); err != nil {
						return err
					}
					if u+n > lim {
						u -= c.evict(u+n-lim, distance, demand, d, shard)
					}
				}
				if err := c.writeUsage(u); err != nil {
					return err
				}
			}
			usage = u
			if u+n > lim {
				return errNoRoom
			}
			if err := create(); err != nil {
				return err
			}
			return c.addUsage(n)
		})
		if !errors.Is(err, errNoRoom) {
			return err
		}
		if !demand {
			c.mu.Lock()
			if c.gen == gen {
				c.refusals.Note(gen, distance)
			}
			c.mu.Unlock()
			return fmt.Errorf("%w: prefetch needs %d bytes, %d of %d in use by shards needed sooner", ErrNoSpace, n, usage, lim)
		}
		if !wait {
			return errNoRoom
		}
		if werr := bo.wait(ctx, wake); werr != nil {
			return fmt.Errorf("%w: waited for %d bytes while %d of the %d-byte limit stayed leased or in flight: %w",
				ErrNoSpace, n, usage, lim, werr)
		}
	}
}

// candidate is an eviction candidate of a dataset: the shard and the
// policy's view of it.
type candidate struct {
	d     *Dataset
	shard int
	p     Candidate // LastUse: Cache.clock, or the file's mtime for Foreign
}

// evict deletes unleased shards until at least need bytes are freed or no
// candidate is left, and returns the bytes freed. Call under the directory
// lock. The choice is the policy's (policy.go): candidates in
// CompareCandidates order, as long as MayEvict allows.
func (c *Cache) evict(need, distance int64, demand bool, self *Dataset, selfShard int) int64 {
	dist := make(map[*Dataset]map[int]int64)
	c.mu.Lock()
	futures := make([]Future, 0, len(c.futures))
	for r := range c.futures {
		futures = append(futures, r.f)
	}
	datasets := append([]*Dataset(nil), c.datasets...)
	c.mu.Unlock()
	pinned := make(map[*Dataset]map[int]bool)
	for _, f := range futures {
		if p, ok := f.(Pinner); ok {
			p.Pinned(func(d *Dataset, shard int) {
				m := pinned[d]
				if m == nil {
					m = make(map[int]bool)
					pinned[d] = m
				}
				m[shard] = true
			})
		}
		f.NextUses(func(d *Dataset, shard int, distance int64) {
			m := dist[d]
			if m == nil {
				m = make(map[int]int64)
				dist[d] = m
			}
			if old, ok := m[shard]; !ok || distance < old {
				m[shard] = distance
			}
		})
	}
	// The first pass offers the shards this process knows are on disk
	// (onDisk, once the registration's pass has run: see diskKnown), in
	// one process all there are, so that a dataset of many shards of
	// which the cache holds a few costs no system call per shard never
	// fetched. Should it free too little, the second offers the others
	// whose files are there (another process's fetches).
	freed := c.evictPass(need, distance, demand, self, selfShard, datasets, dist, pinned, true)
	if freed < need {
		freed += c.evictPass(need-freed, distance, demand, self, selfShard, datasets, dist, pinned, false)
	}
	return freed
}

// evictPass is a pass of evict over the candidates of datasets: with
// known, the shards onDisk of the datasets whose registration's pass ran,
// and every dataset registered only by other processes; without, the
// shards of the others whose files are there.
func (c *Cache) evictPass(need, distance int64, demand bool, self *Dataset, selfShard int, datasets []*Dataset,
	dist map[*Dataset]map[int]int64, pinned map[*Dataset]map[int]bool, known bool) int64 {
	var cands []candidate
	for _, d := range datasets {
		if !Evictable(false, false, !d.remote) {
			continue // no shard of local-only data is a candidate
		}
		c.mu.Lock()
		diskKnown := d.diskKnown
		c.mu.Unlock()
		if !known && !diskKnown {
			continue // the first pass offered them all
		}
		first := len(cands)
		c.mu.Lock() // one hold for the dataset's states, not one per shard
		for i := range d.st {
			if d == self && i == selfShard {
				continue
			}
			st := &d.st[i]
			if diskKnown && st.onDisk != known {
				continue
			}
			if !Evictable(st.refs > 0 || pinned[d][i], st.flight != nil, !d.remote) {
				continue
			}
			dd, ok := dist[d][i]
			lastUse := st.lastUse
			if st.turnUse > 0 {
				lastUse = st.turnUse
			}
			cands = append(cands, candidate{d: d, shard: i, p: NewCandidate(ok, dd, lastUse)})
		}
		c.mu.Unlock()
		if !known {
			// The shards not known to be on disk: those whose files are.
			kept := cands[:first]
			for _, cd := range cands[first:] {
				if d.anyFile(cd.shard) {
					kept = append(kept, cd)
				}
			}
			cands = kept
		}
	}
	// Datasets registered only by other processes: their plans are not
	// known here, so they come after this process's unplanned shards,
	// least recently written first.
	for _, d := range c.foreignDatasets(datasets) {
		if !known {
			break // the first pass offered them
		}
		for i, sh := range d.src.Shards {
			fi, err := os.Stat(d.path(sh.Files[0].Raw))
			if err != nil && sh.Files[0].Zip != "" {
				fi, err = os.Stat(d.path(sh.Files[0].Zip))
			}
			if err != nil {
				continue
			}
			cands = append(cands, candidate{d: d, shard: i, p: Candidate{Class: Foreign, Dist: Far, LastUse: fi.ModTime().UnixNano()}})
		}
	}
	slices.SortStableFunc(cands, func(x, y candidate) int { return CompareCandidates(x.p, y.p) })
	return Evict(&sortedVictims{cands: cands}, need, distance, demand)
}

// sortedVictims is Victims over candidates sorted in the policy's order.
type sortedVictims struct {
	cands []candidate
	next  int
}

func (v *sortedVictims) First() (Candidate, bool) {
	if v.next >= len(v.cands) {
		return Candidate{}, false
	}
	return v.cands[v.next].p, true
}

func (v *sortedVictims) Evict() int64 {
	cd := v.cands[v.next]
	v.next++
	return cd.d.evictShard(cd.shard)
}

// evictShard deletes shard's files unless it is leased or being fetched
// by any process, and returns the bytes freed. Call under the directory
// lock, without Cache.mu.
func (d *Dataset) evictShard(shard int) int64 {
	c := d.c
	files := d.src.Shards[shard].Files
	c.mu.Lock()
	held := d.st[shard].idle != nil
	c.mu.Unlock()
	if !held && !d.anyFile(shard) {
		c.mu.Lock()
		d.st[shard].onDisk = false
		c.mu.Unlock()
		// Nothing to free: the policy offers shards never fetched too
		// (unplanned ones first). One stat instead of creating, locking
		// and closing the shard's lock file. (A shard held idle goes on:
		// its hold ends, and OnEvict runs, even if its file was deleted
		// by hand.)
		return 0
	}
	lf, err := os.OpenFile(d.lockPath(shard), os.O_RDWR|os.O_CREATE, d.c.opts.fileMode())
	if err != nil {
		return 0
	}
	defer lf.Close()
	if ok, err := tryLock(lf, true); err != nil || !ok {
		return 0 // being fetched by another process
	}
	d.dropIdle(shard) // this process's idle hold gives way (idlehold.go)
	// A lease anywhere holds a shared lock on the first raw file.
	if rf, err := os.Open(d.path(files[0].Raw)); err == nil {
		defer rf.Close()
		if ok, err := tryLock(rf, true); err != nil || !ok {
			return 0
		}
	}
	// Re-check this process's state: a lease or fetch may have begun.
	c.mu.Lock()
	st := d.st[shard]
	c.mu.Unlock()
	if st.refs > 0 || st.flight != nil {
		return 0
	}
	var freed int64
	for _, f := range files {
		for _, rel := range []string{f.Raw, f.Zip} {
			if rel == "" {
				continue
			}
			p := d.path(rel)
			fi, err := os.Stat(p)
			if err != nil {
				continue
			}
			if err := os.Remove(p); err == nil || errors.Is(err, fs.ErrNotExist) {
				if err == nil {
					freed += fi.Size()
				}
			}
		}
	}
	c.mu.Lock()
	d.st[shard].onDisk = false
	c.mu.Unlock()
	d.evicted(shard)
	if freed > 0 {
		c.stats.evictions.Add(1)
		d.stats.evictions.Add(1)
		c.stats.evictedBytes.Add(freed)
		d.stats.evictedBytes.Add(freed)
	}
	return freed
}

// Touch records that a consumer taking turns (stream's ordered admissions,
// see Order) moved to shard in its turn: from then on the shard's last use
// in the eviction order (Candidate.LastUse, which breaks ties of class and
// distance) is this, not its leases. A lease comes when its download ends,
// so the order of the leases of shards fetched at once is timing; the
// turns' order is the plan's (package sim ticks its clock at each turn).
func (d *Dataset) Touch(shard int) {
	if shard < 0 || shard >= len(d.st) {
		return
	}
	c := d.c
	c.mu.Lock()
	c.clock++
	d.st[shard].turnUse = c.clock
	c.mu.Unlock()
}

// Consumers returns the number of registered Futures (consumers reading
// through this Cache in this process).
func (c *Cache) Consumers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.futures)
}

// anyFile reports whether any of shard's files (raw or compressed) is in
// the directory. A fetch renames its files into place under the shard's
// lock, so a shard without any is not one an eviction could free.
func (d *Dataset) anyFile(shard int) bool {
	for _, f := range d.src.Shards[shard].Files {
		for _, rel := range []string{f.Raw, f.Zip} {
			if rel == "" {
				continue
			}
			if _, err := os.Lstat(d.path(rel)); err == nil {
				return true
			}
		}
	}
	return false
}
