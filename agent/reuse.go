package agent

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/storage"
)

// cacheDirs maps each local directory a dataset caches a remote into (its
// local joined with its split, for the dataset and each of its streams)
// to that remote (with the split). Streams without a local (the agent's
// default cache root, a directory per remote) or without a remote (data
// already local) claim nothing.
func cacheDirs(spec agentapi.Dataset) map[string]string {
	out := map[string]string{}
	add := func(remote, local, split string) {
		if remote == "" || local == "" {
			return
		}
		remote = strings.TrimRight(remote, "/")
		if split != "" {
			remote += "/" + strings.Trim(split, "/")
		}
		out[filepath.Join(filepath.Clean(local), split)] = remote
	}
	add(spec.Remote, spec.Local, spec.Split)
	for _, s := range spec.Streams {
		add(s.Remote, s.Local, s.Split)
	}
	return out
}

// reusedLocal returns an error naming the directory when a dataset open
// on this agent caches another remote into a local directory spec also
// caches into (MosaicML refuses such a "reused local directory" while the
// other dataset is alive). Shards are named alike in every dataset
// (shard.00000.mds, ...), so the second dataset would be served the
// first's cached shards wherever the two indexes agree: silently the
// wrong samples. The caller holds a.mu.
func (a *Agent) reusedLocal(spec agentapi.Dataset) error {
	want := cacheDirs(spec)
	if len(want) == 0 {
		return nil
	}
	check := func(dirs map[string]string) error {
		for dir, remote := range dirs {
			if other, ok := want[dir]; ok && other != remote {
				return &agentapi.Error{Code: agentapi.CodeInvalid, Message: fmt.Sprintf(
					"local directory %s caches %s for another dataset open on this node; %s needs a local directory of its own (reused local directory)",
					dir, storage.RedactURL(remote), storage.RedactURL(other))}
			}
		}
		return nil
	}
	for _, d := range a.datasets {
		if c := d.opts.Cache; c != nil && cacheGone(c) {
			continue
		}
		if err := check(d.dirs); err != nil {
			return err
		}
	}
	// A dataset still opening (its index on its way into the directory)
	// holds its directories too.
	for _, dirs := range a.opening {
		if err := check(dirs); err != nil {
			return err
		}
	}
	return nil
}

// claimDirs records spec's cache directories as those of a dataset being
// opened (a.opening), until the caller deletes the token it returns; the
// caller holds a.mu and has checked them (reusedLocal).
func (a *Agent) claimDirs(spec agentapi.Dataset) uint64 {
	if a.opening == nil {
		a.opening = map[uint64]map[string]string{}
	}
	a.openSeq++
	a.opening[a.openSeq] = cacheDirs(spec)
	return a.openSeq
}
