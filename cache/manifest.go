package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
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

// appendManifest appends the manifest of the shards of directory dir as
// json.Marshal writes a manifest, byte for byte, without building one (a
// 40k-shard dataset's is a few MB of JSON).
func appendManifest(dst []byte, dir string, shards []Shard) []byte {
	encodeManifest(dir, shards, func(b []byte) bool {
		dst = append(dst, b...)
		return true
	})
	return dst
}

// manifestIs reports whether old is the manifest appendManifest writes
// for dir and shards, without building it: a restart compares a 40k-shard
// dataset's manifest in place at the cost of one read of it.
func manifestIs(old []byte, dir string, shards []Shard) bool {
	return encodeManifest(dir, shards, func(b []byte) bool {
		if len(old) < len(b) || string(old[:len(b)]) != string(b) {
			return false
		}
		old = old[len(b):]
		return true
	}) && len(old) == 0
}

// encodeManifest passes the manifest of appendManifest to emit in pieces
// (about one per shard, in a buffer emit must not keep) until emit returns
// false, and reports whether it never did.
func encodeManifest(dir string, shards []Shard, emit func([]byte) bool) bool {
	buf := make([]byte, 0, 512)
	buf = append(buf, `{"dir":`...)
	buf = appendJSONString(buf, dir)
	buf = append(buf, `,"shards":`...)
	if len(shards) == 0 {
		return emit(append(buf, "null}"...))
	}
	buf = append(buf, '[')
	for i, sh := range shards {
		if i > 0 {
			buf = append(buf, ',')
		}
		if len(sh.Files) == 0 {
			buf = append(buf, "null"...)
		} else {
			buf = append(buf, '[')
			for j, f := range sh.Files {
				if j > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, '[')
				buf = appendJSONString(buf, f.Raw)
				buf = append(buf, ',')
				buf = appendJSONString(buf, f.Zip)
				buf = append(buf, ']')
			}
			buf = append(buf, ']')
		}
		if len(buf) >= 256 {
			if !emit(buf) {
				return false
			}
			buf = buf[:0]
		}
	}
	return emit(append(buf, "]}"...))
}

// appendJSONString appends s as json.Marshal writes a string: printable
// ASCII other than " \ < > & as it is, anything else through
// json.Marshal itself.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

func (d *Dataset) manifestPath() string {
	h := fnv.New64a()
	h.Write([]byte(d.src.Dir))
	return filepath.Join(d.c.dir, metaDir, manifestDir, fmt.Sprintf("%016x.json", h.Sum64()))
}

// manifestCurrent reports whether the dataset's manifest in place is the
// one appendManifest writes for it. Manifests are only ever renamed into
// place, whole, so it needs no lock.
func (d *Dataset) manifestCurrent() bool {
	old, err := os.ReadFile(d.manifestPath())
	return err == nil && manifestIs(old, d.src.Dir, d.src.Shards)
}

// manifestRel names the dataset's manifest among the cache's background
// writes (see writeManifestBehind).
func (d *Dataset) manifestRel() string {
	rel, _ := filepath.Rel(d.c.dir, d.manifestPath())
	return filepath.ToSlash(rel)
}

// writeManifestBehind writes the dataset's manifest in the background as
// a WriteFileBehind write that gates the commits under the dataset's
// directory: its shards are downloaded and read early meanwhile (the
// manifest's sync took 2-5 ms of a cold Open's ~8 ms here, before the
// first shard's GET could start), but none is renamed into place before
// the manifest is, and none at all after its write failed, until a later
// Add of the dataset writes it again. So a crash never leaves a shard in
// place that other processes could not evict. Close waits for it.
func (d *Dataset) writeManifestBehind(ctx context.Context) error {
	b := appendManifest(nil, d.src.Dir, d.src.Shards)
	c := d.c
	_, end, err := c.addBehind(d.manifestRel(), d.dir)
	if err != nil {
		return fmt.Errorf("cache %s: %w", c.dir, err)
	}
	hold := c.behind.manifestHold
	wctx := context.WithoutCancel(ctx)
	go func() {
		defer c.wg.Done()
		if hold != nil {
			<-hold
		}
		if c.opts.Limit == 0 {
			// As an index written behind (firstDownload): not beside the
			// first shard's GET. Under a limit the shards are read once
			// committed, and the commits wait for this write.
			c.behind.awaitFetch(c.bg)
		}
		end(d.writeManifest(wctx, b))
	}()
	return nil
}

// writeManifest records the dataset's shard files, b (appendManifest),
// unless the manifest in place is b already: it writes and syncs a
// temporary file of its own, then renames it into place under the
// directory lock (not held for the sync).
func (d *Dataset) writeManifest(ctx context.Context, b []byte) error {
	p := d.manifestPath()
	if err := os.MkdirAll(filepath.Dir(p), d.c.opts.dirMode()); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	// A name no other writer uses, as the lock is not held (O_EXCL: two
	// writers of this process in the same clock tick take the next). A
	// crash leaves it (foreignDatasets reads only *.json).
	var tmp string
	var f *os.File
	var err error
	stamp := time.Now().UnixNano()
	for i := 0; ; i++ {
		tmp = fmt.Sprintf("%s.%d-%x-%d.tmp", p, os.Getpid(), stamp, i)
		// Synced before the rename: a crash must not leave an empty or
		// torn manifest in place, which foreignDatasets skips, so that
		// no other process could evict the dataset's shards.
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, d.c.opts.fileMode())
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i == 100 {
			return fmt.Errorf("cache: %w", err)
		}
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.c.locked(ctx, func() error {
			if old, err := os.ReadFile(p); err == nil && string(old) == string(b) {
				return nil // written meanwhile
			}
			return os.Rename(tmp, p)
		})
	}
	os.Remove(tmp) // renamed, or not to be
	if err != nil {
		return fmt.Errorf("cache: write %s: %w", p, err)
	}
	removeOrphanTemps(p)
	return nil
}

// removeOrphanTemps deletes the temporary files of manifest p that a
// crashed writer left (writeManifest's names carry the writer's process
// ID): those of processes that no longer exist. A live process's, or one
// whose name does not parse, is left alone. Best effort.
func removeOrphanTemps(p string) {
	names, err := filepath.Glob(p + ".*.tmp")
	if err != nil {
		return
	}
	for _, name := range names {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(name, p+"."), "-", 2)[0])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			os.Remove(name)
		}
	}
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
	mine := make(map[string]bool, len(known))
	for _, d := range known {
		have[d.dir] = true
		mine[filepath.Base(d.manifestPath())] = true
	}
	var out []*Dataset
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || mine[e.Name()] {
			// A dataset registered here has its manifest by that name:
			// not read and parsed again at every eviction (a 20,000-shard
			// manifest was 86% of an eviction's CPU).
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
