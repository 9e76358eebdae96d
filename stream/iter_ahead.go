package stream

// NextLocal reports whether Next can deliver the next sample without a
// download or a wait for room: it lies in the current shard, or in one
// this process has open and leased, or that the cache holds now (see
// cache.Dataset.Local). A reader that runs ahead of its consumer (the
// agent's read-ahead under a cache limit) goes on only while it is true,
// so that running ahead never fetches a shard nor takes room a demand
// needs. False past the known IDs of a lazy plan. It is a snapshot: the
// shard may be evicted before Next leases it, which then fetches it. Call
// it from the iterator's goroutine.
func (it *Iterator) NextLocal() bool {
	if it.err != nil || it.closed {
		return true // Next returns false at once
	}
	ids := it.ids
	for p := it.pos.Load(); p < int64(len(ids)); p++ {
		id := ids[p]
		if id < 0 {
			continue
		}
		shard, _, err := it.d.planner.Locate(id)
		if err != nil {
			return true // Next reports it
		}
		if it.cur != nil && it.cur.shard == shard {
			return true
		}
		return it.d.shardLocal(shard)
	}
	return len(ids) >= it.total // the end; or the rest of a lazy plan is not mapped yet
}

// shardLocal reports whether global shard can be leased now without a
// download or a wait (see NextLocal).
func (d *Dataset) shardLocal(shard int) bool {
	t := d.table
	t.mu.Lock()
	o := t.m[shard]
	open := o != nil && o.refs > 0
	t.mu.Unlock()
	if open {
		return true
	}
	ref := d.shards[shard]
	cds := d.streams[ref.stream].cds
	return cds == nil || cds.Local(ref.local)
}
