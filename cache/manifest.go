package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A manifest, under <root>/.sluice/datasets/, lists the shard files of a
// remote-backed dataset, so that a process that did not register the
// dataset can still evict its unleased shards (several jobs on a node
// share one cache). Only remote-backed datasets get one: data that exists
// only locally is never deleted.
type manifest struct {
	// Dir is the dataset directory relative to the cache root.
	Dir string `json:"dir"`
	// Shards lists each shard's files, relative to Dir: raw then
	// compressed name, per file (the compressed name may be empty).
	Shards [][][2]string `json:"shards"`
}

const manifestDir = "datasets"

func (d *Dataset) manifestPath() string {
	h := fnv.New64a()
	h.Write([]byte(d.src.Dir))
	return filepath.Join(d.c.dir, metaDir, manifestDir, fmt.Sprintf("%016x.json", h.Sum64()))
}

// writeManifest records the dataset's shard files. Call under the
// directory lock.
func (d *Dataset) writeManifest() error {
	m := manifest{Dir: d.src.Dir}
	for _, sh := range d.src.Shards {
		var files [][2]string
		for _, f := range sh.Files {
			files = append(files, [2]string{f.Raw, f.Zip})
		}
		m.Shards = append(m.Shards, files)
	}
	b, err := json.Marshal(&m)
	if err != nil {
		return err
	}
	p := d.manifestPath()
	if old, err := os.ReadFile(p); err == nil && string(old) == string(b) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), d.c.opts.dirMode()); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, d.c.opts.fileMode()); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// foreignDatasets returns Datasets, for eviction only, for the manifests
// of datasets this Cache has not registered. Call under the directory
// lock.
func (c *Cache) foreignDatasets(known []*Dataset) []*Dataset {
	entries, err := os.ReadDir(filepath.Join(c.dir, metaDir, manifestDir))
	if err != nil {
		return nil
	}
	have := make(map[string]bool, len(known))
	for _, d := range known {
		have[d.dir] = true
	}
	var out []*Dataset
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(c.dir, metaDir, manifestDir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var m manifest
		if err != nil || json.Unmarshal(b, &m) != nil || (m.Dir != "" && !filepath.IsLocal(filepath.FromSlash(m.Dir))) {
			continue // not ours to trust
		}
		dir := filepath.Join(c.dir, filepath.FromSlash(m.Dir))
		if have[dir] {
			continue
		}
		src := Source{Dir: m.Dir}
		ok := true
		for _, files := range m.Shards {
			var sh Shard
			for _, f := range files {
				if checkRel(f[0]) != nil || (f[1] != "" && checkRel(f[1]) != nil) {
					ok = false
				}
				sh.Files = append(sh.Files, File{Raw: f[0], Zip: f[1]})
			}
			if len(sh.Files) == 0 {
				ok = false
			}
			src.Shards = append(src.Shards, sh)
		}
		if !ok {
			continue
		}
		out = append(out, &Dataset{c: c, src: src, dir: dir, remote: true, st: make([]shardState, len(src.Shards))})
	}
	return out
}
