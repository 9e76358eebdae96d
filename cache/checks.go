package cache

import "io"

// Several jobs on a node register one dataset directory once and share
// its Dataset (see lookup). A job's Source may ask for a check of the
// downloaded bytes (File.Verify, MosaicML's validate_hash) that the
// registration it joins lacks, or another one: its check must not be
// dropped because another job came first. So a registration whose
// Source.VerifyKey the dataset has not seen adds its Files' checks, and
// every download of the dataset runs every check registered for the file
// (each over the whole file). Shards already cached are not checked
// again: MosaicML checks a file when it downloads it, too.

// laterChecks are the checks of the registrations after the first that
// named a check the dataset had not seen; copied on write.
type laterChecks struct {
	keys   []string
	shards [][]Shard // each such registration's Source.Shards
}

// addChecks adds the checks of s, a later registration of d, when its
// VerifyKey is new to d. Call under c.mu.
func (d *Dataset) addChecks(s *Source) {
	if s.VerifyKey == "" || s.VerifyKey == d.src.VerifyKey {
		return
	}
	old := d.later.Load()
	next := &laterChecks{}
	if old != nil {
		for _, k := range old.keys {
			if k == s.VerifyKey {
				return
			}
		}
		next.keys = append(next.keys, old.keys...)
		next.shards = append(next.shards, old.shards...)
	}
	next.keys = append(next.keys, s.VerifyKey)
	next.shards = append(next.shards, s.Shards)
	d.later.Store(next)
}

// checks returns every check registered for the file of shard whose raw
// form is f.Raw: f's own (the first registration's) and those of later
// registrations (see addChecks).
func (d *Dataset) checks(shard int, f File) []func(io.Reader) error {
	var fns []func(io.Reader) error
	if f.Verify != nil {
		fns = append(fns, f.Verify)
	}
	later := d.later.Load()
	if later == nil {
		return fns
	}
	for _, shards := range later.shards {
		if shard >= len(shards) {
			continue
		}
		for _, g := range shards[shard].Files {
			if g.Raw == f.Raw && g.Verify != nil {
				fns = append(fns, g.Verify)
			}
		}
	}
	return fns
}
