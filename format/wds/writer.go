package wds

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"
)

// epoch is the modification time written on every member, so equal samples
// give equal archives.
var epoch = time.Unix(0, 0).UTC()

// Writer writes samples to a WebDataset archive. It is not safe for
// concurrent use. Errors are sticky: after the first failure every call
// returns it.
type Writer struct {
	tw   *tar.Writer
	last string
	err  error
}

// NewWriter returns a Writer that writes an archive to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{tw: tar.NewWriter(w)}
}

// Write appends one sample: a member "key.field" for each field, in sorted
// field order. The key must not contain a dot in its last path element and
// must not repeat the previous sample's key (readers would merge them).
func (w *Writer) Write(key string, fields map[string][]byte) error {
	if w.err != nil {
		return w.err
	}
	if err := validKey(key); err != nil {
		return fmt.Errorf("wds: write sample: %w", err)
	}
	if key == w.last {
		return fmt.Errorf("wds: write sample: key %q repeats the previous sample's key", key)
	}
	if len(fields) == 0 {
		return fmt.Errorf("wds: write sample %q: no fields", key)
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		if err := validField(name); err != nil {
			return fmt.Errorf("wds: write sample %q: %w", key, err)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		data := fields[name]
		h := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     key + "." + name,
			Size:     int64(len(data)),
			Mode:     0o644,
			ModTime:  epoch,
			Format:   tar.FormatUnknown, // USTAR when it fits, PAX otherwise
		}
		if err := w.tw.WriteHeader(h); err != nil {
			w.err = fmt.Errorf("wds: write %q: %w", h.Name, err)
			return w.err
		}
		if _, err := w.tw.Write(data); err != nil {
			w.err = fmt.Errorf("wds: write %q: %w", h.Name, err)
			return w.err
		}
	}
	w.last = key
	return nil
}

// Close writes the end-of-archive marker. It does not close the underlying
// writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.tw.Close(); err != nil {
		w.err = fmt.Errorf("wds: close: %w", err)
		return w.err
	}
	w.err = errors.New("wds: writer closed")
	return nil
}
