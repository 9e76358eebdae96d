// Package wds reads and writes WebDataset shards: POSIX tar archives whose
// members are grouped into samples by key.
//
// # Format
//
// A member named "dir/base.ext1.ext2" belongs to the sample with key
// "dir/base" (everything up to the first dot of the last path element) and
// is stored in that sample under the field name "ext1.ext2" (the rest,
// lowercased, possibly empty), as webdataset's base_plus_ext does; a hidden
// name in a directory ("dir/.x") is keyed by the directory ("dir/"), as
// webdataset yields it. The members of one sample are consecutive in the
// archive; a new key starts a new sample. Members that are not regular
// files (directories, links), regular files whose base name has no dot,
// top-level names starting with one, and webdataset's metadata names
// ("__X__" at the top, or under a first path element "__X__") are skipped.
// A key that reappears after another key is a new sample with the same key;
// a field repeated inside one sample is an error, as are member names that
// are not UTF-8, contain NUL or have a ".." element, and sparse members (tar
// --sparse), which are refused with ErrUnsupported.
//
// # Reading
//
// Reader walks an archive sequentially in the Scanner shape:
//
//	r := wds.NewReader(f, nil)
//	for r.Next() {
//		s := r.Sample() // s.Key, s.Fields["jpg"], ...
//	}
//	if err := r.Err(); err != nil { ... }
//
// OpenShard indexes an archive held in an io.ReaderAt and gives random
// access to its samples by position, with the byte span of each sample for
// zero-copy readers; OpenShardBytes does the same for an archive in memory
// (an mmap), parsing plain USTAR/GNU headers directly. File is a mapped
// shard file, the format.Shard the streaming engine reads. Scan summarises
// an archive for an index (sample count, first and last keys, header
// digest), skipping member data on seekable readers.
//
// # Errors
//
// Malformed archives yield errors matching ErrCorrupt that name the member
// and byte offset; every length from the input is checked against the
// configured limits before memory is allocated for it.
//
// # Writing
//
// Writer emits deterministic archives: members in sorted field order, USTAR
// or PAX headers with a fixed modification time, mode 0644, no owner names,
// so equal samples always give equal bytes.
package wds
