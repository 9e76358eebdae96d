// Package input reads the raw data that sluice convert turns into shards,
// as a Source: a deterministic sequence of items that Read returns in
// batches, from one goroutine, and that Decode turns into named fields, from
// any number of goroutines.
//
// Open understands:
//
//	JSON lines (.jsonl .json .ndjson)  one object per line; a fast decoder
//	                                    (DecodeObject) that allocates nothing
//	                                    for plain strings and numbers
//	CSV (.csv) and TSV (.tsv)           a header line, then one row per item;
//	                                    cells are untyped Text
//	Parquet (.parquet)                  flat schemas; remote files are
//	                                    downloaded first (random access)
//	WebDataset (.tar)                   samples grouped by key (format/wds),
//	                                    one field per extension plus __key__
//	image folders                       root/<class>/<file>.jpg: columns image
//	                                    and label (classes in sorted order)
//	MDS datasets                        a directory with index.json; records
//	                                    are split into their columns' bytes
//
// Inputs are local paths or store URLs (storage.Registry), several files as
// a brace pattern ("shard-{000000..000099}.tar") or a local glob. A Part
// selects a deterministic slice of the input for scale-out.
//
// # Errors
//
// Bad input yields errors that name the file and the line, row or sample;
// lengths from the input are bounded (MaxLineBytes, MaxImageBytes,
// MaxIndexBytes), Parquet footers are checked before the library reads them,
// and nothing in a file can make the reader panic.
package input
