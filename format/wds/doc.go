// Package wds reads and writes WebDataset shards: POSIX tar archives whose
// members are grouped into samples by key.
//
// # Format
//
// A member named "dir/base.ext1.ext2" belongs to the sample with key
// "dir/base" (everything up to the first dot of the last path element) and
// is stored in that sample under the field name "ext1.ext2" (the rest). The
// members of one sample are consecutive in the archive; a new key starts a
// new sample. Members that are not regular files (directories, links) and
// regular files whose base name has no dot, or starts with a dot, are
// skipped, as the Python webdataset library does. A key that reappears after
// another key is a new sample with the same key; a field repeated inside one
// sample is an error.
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
// OpenShard indexes an archive held in an io.ReaderAt (an mmap in practice)
// and gives random access to its samples by position, with the byte span of
// each sample for zero-copy readers.
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
