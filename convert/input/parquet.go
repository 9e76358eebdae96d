package input

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/sluicedata/sluice/storage"
)

// openLocal opens the file at l: directly for local paths, otherwise as a
// downloaded temporary copy (Parquet needs random access).
func openLocal(ctx context.Context, l location, tempDir string) (f *os.File, tmp string, err error) {
	if !strings.Contains(l.name, "://") {
		f, err := os.Open(l.name)
		if err != nil {
			return nil, "", fmt.Errorf("input: %w", err)
		}
		return f, "", nil
	}
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	tmp = filepath.Join(tempDir, fmt.Sprintf("sluice-input-%d-%s", os.Getpid(), filepath.Base(l.key)))
	if _, err := storage.Download(ctx, l.b, l.key, tmp, nil); err != nil {
		return nil, "", fmt.Errorf("input: download %s: %w", l.name, err)
	}
	f, err = os.Open(tmp)
	if err != nil {
		os.Remove(tmp)
		return nil, "", fmt.Errorf("input: %w", err)
	}
	return f, tmp, nil
}

// recoverParquet turns a panic of the Parquet library on a malformed file
// into an error: input from outside must never crash the process.
func recoverParquet(name string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("input: %s: malformed Parquet file: %v", name, r)
	}
}

// checkParquetFooter checks the magic numbers and that the footer length
// fits in the file, before the library allocates a buffer of that length.
func checkParquetFooter(name string, f io.ReaderAt, size int64) error {
	var head, tail [8]byte
	if size < 12 {
		return fmt.Errorf("input: %s: not a Parquet file (%d bytes)", name, size)
	}
	if _, err := f.ReadAt(head[:4], 0); err != nil {
		return fmt.Errorf("input: %s: %w", name, err)
	}
	if _, err := f.ReadAt(tail[:], size-8); err != nil {
		return fmt.Errorf("input: %s: %w", name, err)
	}
	if string(head[:4]) != "PAR1" || string(tail[4:]) != "PAR1" {
		return fmt.Errorf("input: %s: not a Parquet file (bad magic; encrypted files are not supported)", name)
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > size-12 {
		return fmt.Errorf("input: %s: footer length %d exceeds the file (%d bytes)", name, n, size)
	}
	return nil
}

// checkParquetLayout checks the footer's row groups against the file size
// before any page is read, so a forged size cannot cause huge reads.
func checkParquetLayout(name string, pf *parquet.File, size int64) error {
	md := pf.Metadata()
	for g, rg := range md.RowGroups {
		if rg.NumRows < 0 || rg.NumRows > md.NumRows {
			return fmt.Errorf("input: %s: row group %d declares %d rows of %d in the file", name, g, rg.NumRows, md.NumRows)
		}
		for c, ch := range rg.Columns {
			m := ch.MetaData
			for _, v := range []int64{m.TotalCompressedSize, m.DataPageOffset, m.DictionaryPageOffset, m.IndexPageOffset} {
				if v < 0 || v > size {
					return fmt.Errorf("input: %s: row group %d column %d lies outside the file", name, g, c)
				}
			}
			if m.DataPageOffset+m.TotalCompressedSize > size || m.TotalUncompressedSize < 0 || m.TotalUncompressedSize > 64*size+(1<<20) {
				return fmt.Errorf("input: %s: row group %d column %d has impossible sizes", name, g, c)
			}
		}
	}
	return nil
}
