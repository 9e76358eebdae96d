// Package stream is Sluice's main job: it serves the samples of a dataset
// that lives in object storage (or a local directory) to training
// processes, in MosaicML Streaming's exact order, from a bounded node-local
// cache that is filled ahead of need, and resumes exactly where a run
// stopped.
//
// # Opening
//
// Open takes Options named and defaulted as MosaicML's StreamingDataset
// (remote, local, split, streams, shuffle, shuffle_seed, shuffle_algo,
// num_canonical_nodes, batch_size, cache_limit, predownload,
// download_retry, download_timeout, validate_hash, keep_zip, epoch_size,
// partition_algo, sampling_method, batching_method, …). It reads each
// stream's index.json (downloading it into the local directory when
// missing), plans with package plan and registers the shards with a
// cache.Cache: its own, rooted at Local, or a shared one from
// Options.Cache (the agent runs many datasets, jobs, ranks and workers on
// one cache in one process).
//
// # Reading
//
//	ds, err := stream.Open(ctx, &stream.Options{Remote: "s3://bucket/data", Local: "/mnt/cache", BatchSize: 32})
//	ep, err := ds.NewEpoch(ctx, world, workers)   // advances the epoch counter, like __iter__
//	it, err := ep.Iter(ctx, worker)               // one DataLoader worker's samples
//	for it.Next() {
//		s, err := it.Sample()   // decoded columns; or it.Record() for the raw bytes
//	}
//	err = it.Err()
//	it.Close()
//	st, err := ds.State(samplesYieldedByThisRank) // MosaicML's state_dict
//
// Get(ctx, i) reads any sample by global ID, fetching its shard on demand.
//
// An Iterator walks the plan ahead of its consumer by Predownload samples,
// fetching upcoming shards with bounded parallelism, and tells the cache
// when it will need each shard, so eviction follows the plan.
//
// # Locations
//
// For consumers that read shard files themselves (the agent's Python
// client maps the cached shard and decodes the record), Iterator.Location
// returns the sample's shard file, byte offset and length together with a
// lease that keeps the file in the cache until Location.Release.
//
// # Figures
//
// Every Dataset and Iterator counts samples, bytes, time to first sample,
// time spent waiting for shards and cache hits and misses (Stats).
//
// # Concurrency
//
// A Dataset is safe for concurrent use. An Iterator belongs to one
// goroutine; Locations may be released from any goroutine.
package stream
