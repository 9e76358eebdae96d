// Package cache keeps the shard files of one or more datasets in a local
// directory that every consumer on a node shares: goroutines of one process
// and separate processes alike.
//
// # Shard states
//
// A shard moves through these states:
//
//	absent ──► downloading (<file>.part, reserved at full size, flock'ed)
//	       ──► present (raw and/or compressed file renamed into place)
//	       ──► in use (leased: a shared flock on its first raw file)
//	       ──► evictable (present, unleased) ──► absent
//
// # Idle holds
//
// When the last lease of a shard in a process is released, the process
// keeps the shard's first raw file open with its shared flock for about a
// second (at most 4,096 files a Cache): a shuffled reader that comes back
// to the shard meanwhile leases it with one fstat (a file deleted by hand
// since has no link left: the shard is fetched again), reading the same
// file (Lease.FileID). A held shard is evictable for its own process as
// an unleased one is (its eviction ends the hold first), so a process's
// decisions do not depend on holds; other processes sharing the directory
// find it locked, as if leased, and evict another shard, or wait for the
// hold to end. The end of a hold calls the OnEvict functions, so that a
// reader that keeps the shard mapped with no lease drops it while the file
// is still protected. See idlehold.go.
//
// Every file appears atomically: it is written under a temporary ".part"
// name, synced and renamed. A compressed shard is decompressed once, into
// its raw form; the compressed file is kept only with KeepZip.
//
// # Early leases
//
// Acquire returns once the shard's files are in place. AcquireEarly may
// return sooner: as soon as every byte of a shard the fetch writes is in
// its temporary files (downloaded, decompressed and verified), while they
// are being synced and renamed. Its lease reads them through
// Lease.ReadPath (the temporary path, or the final one after the rename:
// the same inode, so a mapping made before survives it). The fetch keeps
// the shard from eviction until the rename, then downgrades its exclusive
// lock to a shared one and gives the early leases' open file a shared lock
// before letting go, so no other process can evict it in between. A crash
// before the rename leaves only temporary files, which a restart discards.
//
// # Single flight
//
// Concurrent requests for one shard in a process share one fetch. Across
// processes, a per-shard lock file under <dir>/.sluice/locks serialises
// fetches, so each shard is downloaded once per node: a process that finds
// the lock held waits for the other's result instead of downloading again.
//
// # Limit
//
// Bytes in the directory never exceed Options.Limit, counted across
// processes: every byte is reserved, under a directory-wide lock, before it
// is written. Temporary files are created at their full size so that the
// directory's file sizes always account for in-flight downloads. The counter
// lives in <dir>/.sluice/usage; when it would refuse a reservation, the cache
// recounts the directory (deleting temporary files whose writer died) and
// evicts. A fetch is admitted when it is asked for: Prefetch and Acquire
// take the shard's fetch lock (without waiting for it) and reserve its
// bytes, or refuse a prefetch for room, on the caller's goroutine, so that
// what a walk of prefetches gets depends on the order it asks in and on the
// cache's state, not on goroutine timing; only a wait for another
// process's fetch of the shard, or a demand fetch's wait for room, and the
// download itself run in the background.
//
// # Eviction
//
// Only shards of datasets with a remote source are ever evicted, and never
// one that is leased by any process, held idle by another process, or
// being fetched. Among the candidates
// the cache evicts the shard whose next planned use is farthest away
// (Belady's rule, from the Future of each registered consumer); shards no
// consumer plans to use go first, least recently used first, which is plain
// LRU for random access. A prefetch never evicts a shard needed sooner than
// the one it fetches. Each remote-backed dataset leaves a manifest of its
// shard files under <dir>/.sluice/datasets, so a process can also evict
// unleased shards of datasets that only other processes registered (after
// its own unplanned shards, least recently written first).
//
// # Restarts
//
// Open and Add rebuild the state from the directory: complete files are kept
// after a size check, temporary files whose writer is gone are deleted, and
// files of a live process are left alone (they are locked). Add leaves that
// pass over a dataset's files behind its first leases: it runs at the start
// of the next hold of the directory lock (before any reservation or count
// read) or by itself a second later, and a shard is leased meanwhile only
// when its files have their declared sizes. A process killed at any instant
// leaves a valid cache.
//
// # Waits
//
// Every wait (for space, for another process's download, for a lock) has a
// deadline, Options.WaitTimeout, and fails with an error that names the
// shard file and the store.
//
// # Concurrency
//
// A Cache and its Datasets are safe for concurrent use. A Lease is owned by
// the goroutine that acquired it until Release.
//
// The package supports Unix systems (it relies on flock).
package cache
