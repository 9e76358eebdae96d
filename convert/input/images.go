package input

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/sluicedata/sluice/storage"
)

// MaxImageBytes bounds one image file of an image folder.
const MaxImageBytes = 1 << 30

// Image-folder columns.
const (
	ImageColumn = "image"
	LabelColumn = "label"
)

// imageExts maps the file extensions of an image folder to encodings.
var imageExts = map[string]string{
	".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png",
	".webp": "bytes", ".gif": "bytes", ".bmp": "bytes", ".tif": "bytes", ".tiff": "bytes",
}

// images is a Source over an image folder: root/<class>/<file>. Classes
// are the first-level directory names in sorted order; a file's label is
// its class's position, as torchvision's ImageFolder assigns it.
type images struct {
	b       storage.Bucket
	bs      *buckets
	name    string
	files   []string // keys, sorted
	sizes   []int64  // sizes from the listing
	labels  []int64
	classes []string
	enc     string
	next    int
}

func openImages(ctx context.Context, root string, opts *Options, bs *buckets) (Source, error) {
	b, err := bs.open(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	var keys []string
	sizeOf := map[string]int64{}
	encs := map[string]bool{}
	err = b.List(ctx, "", func(o storage.ObjectInfo) error {
		if storage.IsTempName(o.Key) {
			return nil
		}
		class, file, ok := strings.Cut(o.Key, "/")
		if !ok || class == "" || strings.HasPrefix(class, ".") || strings.HasPrefix(path.Base(file), ".") {
			return nil
		}
		enc, ok := imageExts[strings.ToLower(path.Ext(o.Key))]
		if !ok {
			return nil
		}
		encs[enc] = true
		keys = append(keys, o.Key)
		sizeOf[o.Key] = o.Size
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("input: list image folder %s: %w", root, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("input: %s has no images in class subdirectories (want root/<class>/<name>.jpg)", root)
	}
	sort.Strings(keys)
	classIdx := map[string]int64{}
	var classes []string
	for _, k := range keys {
		c, _, _ := strings.Cut(k, "/")
		if _, ok := classIdx[c]; !ok {
			classIdx[c] = 0
			classes = append(classes, c)
		}
	}
	sort.Strings(classes)
	for i, c := range classes {
		classIdx[c] = int64(i)
	}
	im := &images{b: b, bs: bs, name: root, classes: classes, enc: "bytes"}
	if len(encs) == 1 {
		for e := range encs {
			im.enc = e
		}
	}
	for i, k := range keys {
		if p := opts.Part; p.Count > 1 && i%p.Count != p.Index {
			continue
		}
		c, _, _ := strings.Cut(k, "/")
		im.files = append(im.files, k)
		im.sizes = append(im.sizes, sizeOf[k])
		im.labels = append(im.labels, classIdx[c])
	}
	return im, nil
}

// IOBound reports true: Decode reads each image from the store.
func (im *images) IOBound() bool { return true }

// Classes returns the class names in label order.
func (im *images) Classes() []string { return im.classes }

func (im *images) Columns() []Column {
	return []Column{{Name: ImageColumn, Encoding: im.enc}, {Name: LabelColumn, Encoding: "int"}}
}

func (im *images) Read(ctx context.Context, dst []Item, max int) ([]Item, error) {
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	if im.next >= len(im.files) {
		return dst, io.EOF
	}
	for n := 0; n < max && im.next < len(im.files); n++ {
		k := im.files[im.next]
		im.next++
		dst = append(dst, Item{File: im.b.URL(k), Pos: int64(im.next), Data: []byte(k), Label: im.labels[im.next-1], Aux: im.sizes[im.next-1]})
	}
	return dst, nil
}

func (im *images) Decode(ctx context.Context, it *Item, fn FieldFunc) error {
	data, err := readSized(ctx, im.b, string(it.Data), it.Aux.(int64))
	if err != nil {
		return fmt.Errorf("input: read image %s: %w", it.File, err)
	}
	if err := fn([]byte(ImageColumn), Value{Kind: Bytes, Bytes: data}); err != nil {
		return err
	}
	return fn([]byte(LabelColumn), Value{Kind: Int, Int: it.Label})
}

func (im *images) Close() error { return errors.Join(im.bs.Close()) }

// readSized reads an object whose size the listing gave, with one exact
// allocation; an object that changed size since is read whole instead.
func readSized(ctx context.Context, b storage.Bucket, key string, size int64) ([]byte, error) {
	if size <= 0 || size > MaxImageBytes {
		return storage.ReadAll(ctx, b, key, MaxImageBytes)
	}
	r, err := b.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	buf := make([]byte, size+1) // one spare byte detects a grown file
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return buf[:n], nil // shrank or exact: what is there now
	case err != nil:
		return nil, err
	}
	rest, err := io.ReadAll(io.LimitReader(r, MaxImageBytes-int64(n)+1))
	if err != nil {
		return nil, err
	}
	out := append(buf, rest...)
	if int64(len(out)) > MaxImageBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxImageBytes)
	}
	return out, nil
}
