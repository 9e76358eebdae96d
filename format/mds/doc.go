// Package mds reads and writes MosaicML Streaming's MDS shard format,
// byte-compatibly with mosaicml-streaming: column encodings (Encoding),
// shards (Shard, OpenFile, OpenBytes, OpenShard), datasets in a local
// directory (Reader, Scanner, Writer), merging of sub-dataset indexes
// (Merge, MergeIndexes), full verification (Verify) and the canonical
// sample dump (AppendDump).
//
// The byte layout, the encodings and the places where Sluice deliberately
// differs from MosaicML are documented in docs/format/mds.md; the full
// specification is MDS-FORMAT.md sections 2–8 and 16.
//
// # Errors
//
// Malformed input (index, shard header, offsets, records, values) yields a
// *format.CorruptError matching format.ErrCorrupt, naming the file, shard,
// sample and offset. Nothing sized by untrusted input is allocated before it
// is checked against the file's real size.
//
// # Concurrency
//
// Encoding, Shard and Reader are safe for concurrent use (Close aside).
// Writer and Scanner are not.
package mds
