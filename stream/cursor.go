package stream

// Cursor returns a Dataset that plays epochs of d on its own: it shares
// d's streams (their parsed indexes, store handles and cache
// registrations) and planner (so the shuffle's preparation is computed
// once for all cursors), and has its own epoch counter and
// resume state (NewEpoch, Load, Continue, State), open shards and
// figures. A server playing the epochs of many (rank, worker) consumers
// of one dataset takes a cursor for each instead of opening the dataset
// again, which would read and parse every index again (a 40k-shard index
// takes tens of milliseconds and megabytes each time).
//
// Closing a cursor releases only its own state; d must stay open while
// any of its cursors is used. Cursor is safe for concurrent use.
func (d *Dataset) Cursor() *Dataset {
	root := d
	if d.parent != nil {
		root = d.parent
	}
	c := &Dataset{
		opts:       d.opts,
		cache:      d.cache,
		streams:    d.streams,
		shards:     d.shards,
		planner:    d.planner,
		indexBytes: d.indexBytes,
		parent:     root,
	}
	c.tracker = c.planner.NewTracker()
	c.table = newShardTable(c)
	root.tablesMu.Lock()
	root.tables[c.table] = struct{}{}
	root.tablesMu.Unlock()
	return c
}
