// Package convert turns raw data into MDS datasets: the library behind
// "sluice convert".
//
// Run reads an input (JSON lines, CSV/TSV, Parquet, an image folder,
// WebDataset tars or another MDS dataset; see package input), decides the
// output columns (given, from the input's schema, or inferred from its first
// records), optionally fetches the objects that URL columns name (package
// fetch), and writes MDS shards to a local directory or any store URL.
//
// # Pipeline
//
// One goroutine reads batches of raw records in input order. Workers (one
// per core, more when fetching) decode them, fetch URLs through a bounded
// pool and encode MDS records. A sequencer takes the batches back in input
// order and cuts shards with MosaicML's exact size accounting (spec section
// 6), so a dataset is byte-identical to what format/mds.Writer (and
// MosaicML's MDSWriter) would write for the same samples. Shards are
// assembled, hashed and compressed in parallel and committed in order
// (pebble's write-queue shape): each shard file is stored atomically, then
// a journal entry records it; index.json is written last.
//
// # Resuming
//
// The journal (JournalDir under the output) holds one entry per committed
// shard: the shard's index entry, the input position after it and the
// cumulative figures. Because the assignment of records to shards depends
// only on the input and the settings, a restarted Run skips the records of
// the intact journaled shards and continues with the next shard; the
// result is byte-identical to an uninterrupted run. A fingerprint of the
// settings guards against resuming with different ones. index.json never
// names a shard that is missing or partial, because it is written only
// after every shard is stored.
//
// # Scale-out
//
// Options.Part converts a deterministic slice of the input into
// Output/part-I/ (whole files round-robin when there are at least as many
// files as parts, otherwise records round-robin). The parts are joined
// with format/mds.Merge ("sluice merge"). All parts infer the same columns,
// from the first records of the whole input.
//
// # Quality gate
//
// Every run writes a JSON Report next to the index: samples in and out,
// failures by reason, fetch success rate, bytes, time and, for parts, each
// part's figures (ReportFile at the output root combines them). Below
// Options.MinSuccessRate, Run returns ErrQualityGate and writes no index.
package convert
