package sim

import "github.com/sluicedata/sluice/cache"

// victims is a node's eviction candidates (present, unleased shards) in
// the cache policy's order (cache.CompareCandidates, ties by the shards'
// index in the dataset, as the cache's stable sort over its shards): an indexed binary
// heap, so that choosing a victim costs O(log n) instead of a scan of the
// whole cache. A planned candidate's Dist is held as its absolute next-use
// position: every planned distance is measured from the same position, so
// the order is the same, and it does not change as the consumers move.
//
// Each heap entry carries a copy of its key, so that the sift compares
// neighbouring entries instead of looking up two shards' keys scattered
// over the per-shard table (the cost at seed scale was those cache misses).
type victims struct {
	key  []cache.Candidate // per shard
	at   []int32           // per shard: index in heap, -1 if not a candidate
	gid  []int32           // per shard: its index in the dataset (node.gid)
	heap []victim
}

// victim is a heap entry: a shard, its index in the dataset (the order of
// ties) and its key.
type victim struct {
	k          cache.Candidate
	shard, gid int32
}

// add makes room for the next shard (node.local), whose index in the
// dataset is g.
func (v *victims) add(g int32) {
	v.key = append(v.key, cache.Candidate{})
	v.at = append(v.at, -1)
	v.gid = append(v.gid, g)
}

func (v *victims) less(i, j int) bool {
	a, b := &v.heap[i], &v.heap[j]
	if c := cache.CompareCandidates(a.k, b.k); c != 0 {
		return c < 0
	}
	return a.gid < b.gid
}

func (v *victims) swap(i, j int) {
	v.heap[i], v.heap[j] = v.heap[j], v.heap[i]
	v.at[v.heap[i].shard] = int32(i)
	v.at[v.heap[j].shard] = int32(j)
}

func (v *victims) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !v.less(i, p) {
			return
		}
		v.swap(i, p)
		i = p
	}
}

func (v *victims) down(i int) {
	n := len(v.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && v.less(r, l) {
			m = r
		}
		if !v.less(m, i) {
			return
		}
		v.swap(i, m)
		i = m
	}
}

// has reports whether shard is a candidate.
func (v *victims) has(shard int) bool { return v.at[shard] >= 0 }

// set makes shard a candidate with key k, or updates its key.
func (v *victims) set(shard int, k cache.Candidate) {
	v.key[shard] = k
	i := int(v.at[shard])
	if i < 0 {
		i = len(v.heap)
		v.heap = append(v.heap, victim{k: k, shard: int32(shard), gid: v.gid[shard]})
		v.at[shard] = int32(i)
		v.up(i)
		return
	}
	v.heap[i].k = k
	v.up(i)
	v.down(int(v.at[shard]))
}

// remove makes shard no candidate.
func (v *victims) remove(shard int) {
	i := int(v.at[shard])
	if i < 0 {
		return
	}
	last := len(v.heap) - 1
	if i != last {
		v.swap(i, last)
	}
	v.heap = v.heap[:last]
	v.at[shard] = -1
	if i != last {
		moved := v.heap[i].shard
		v.up(i)
		v.down(int(v.at[moved]))
	}
}

// first returns the candidate the policy evicts first (ok false: none).
func (v *victims) first() (shard int, ok bool) {
	if len(v.heap) == 0 {
		return 0, false
	}
	return int(v.heap[0].shard), true
}

// all returns the candidates, in no order, in a new slice.
func (v *victims) all() []int32 {
	out := make([]int32, len(v.heap))
	for i := range v.heap {
		out[i] = v.heap[i].shard
	}
	return out
}
