package input

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // decoders for pil columns
	_ "image/jpeg"
	_ "image/png"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/sluicedata/sluice/convert/fetch"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/storage"
)

// SkipError is returned by Decode for a record the source skips on
// purpose (a non-image file in an image folder, a broken image); Reason
// names why, for the report's counts.
type SkipError struct {
	Reason string
	Err    error
}

// Error formats the reason and cause.
func (e *SkipError) Error() string { return e.Reason + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *SkipError) Unwrap() error { return e.Err }

// Skip reasons of image folders.
const (
	SkipNotImage    = "not_image"    // the file's content is no image format
	SkipWrongType   = "wrong_type"   // an image of another type than the column's (a PNG in a jpeg column)
	SkipBrokenImage = "broken_image" // starts like an image but does not decode
	SkipNoClass     = "no_class"     // a file at the root, outside every class directory
)

// ImageEncodings lists the column encodings an image folder can write.
var ImageEncodings = []string{"jpeg", "png", "pil", "bytes"}

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
	pil     *mds.Encoding
	local   *localFolder // a local folder: files are read where its links lead
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
	classOf := map[string]bool{} // class directories holding at least one image file
	add := func(key string, size int64) error {
		if storage.IsTempName(key) {
			return nil
		}
		class, file, ok := strings.Cut(key, "/")
		if strings.HasPrefix(class, ".") || strings.HasPrefix(path.Base(key), ".") {
			return nil // hidden files and directories
		}
		keys = append(keys, key)
		sizeOf[key] = size
		if !ok || class == "" || file == "" {
			return nil // a file outside the class directories: counted as a skip
		}
		if enc, ok := imageExts[strings.ToLower(path.Ext(key))]; ok {
			encs[enc] = true
			classOf[class] = true
		}
		return nil
	}
	var local *localFolder
	if dir := localFolderRoot(root); dir != "" {
		local, err = walkLocalFolder(ctx, dir, add)
	} else {
		err = b.List(ctx, "", func(o storage.ObjectInfo) error { return add(o.Key, o.Size) })
	}
	if err != nil {
		return nil, fmt.Errorf("input: list image folder %s: %w", root, err)
	}
	if len(classOf) == 0 {
		return nil, fmt.Errorf("input: %s has no images in class subdirectories (want root/<class>/<name>.jpg)", root)
	}
	sort.Strings(keys)
	var classes []string
	for c := range classOf {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	classIdx := map[string]int64{}
	for i, c := range classes {
		classIdx[c] = int64(i)
	}
	im := &images{b: b, bs: bs, name: root, classes: classes, enc: "bytes", local: local}
	if len(encs) == 1 {
		for e := range encs {
			im.enc = e
		}
	}
	switch opts.ImageEncoding {
	case "":
	case "jpeg", "png", "pil", "bytes":
		im.enc = opts.ImageEncoding
	default:
		return nil, fmt.Errorf("input: bad image encoding %q (want one of %s)", opts.ImageEncoding, strings.Join(ImageEncodings, ", "))
	}
	if im.enc == "pil" {
		im.pil, _ = mds.ParseEncoding("pil") // a known encoding
	}
	for i, k := range keys {
		if p := opts.Part; p.Count > 1 && i%p.Count != p.Index {
			continue
		}
		c, _, _ := strings.Cut(k, "/")
		label, ok := classIdx[c]
		if !ok {
			label = -1 // not a class: skipped with a reason
		}
		im.files = append(im.files, k)
		im.sizes = append(im.sizes, sizeOf[k])
		im.labels = append(im.labels, label)
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

// Decode reads one image file and checks it against the column encoding:
// the file's real type comes from its content, not its name. jpeg and png
// columns take only fully decodable images of that type, pil columns any
// image Go decodes (converted to pil), bytes columns any image file as it
// is. Other files are skipped with a *SkipError naming the reason.
func (im *images) Decode(ctx context.Context, it *Item, fn FieldFunc) error {
	if it.Label < 0 {
		return &SkipError{Reason: SkipNoClass, Err: fmt.Errorf("%s is not inside a class directory", it.File)}
	}
	var data []byte
	var err error
	if im.local != nil {
		data, err = readLocal(im.local.real[string(it.Data)], it.Aux.(int64))
	} else {
		data, err = readSized(ctx, im.b, string(it.Data), it.Aux.(int64))
	}
	if err != nil {
		return fmt.Errorf("input: read image %s: %w", it.File, err)
	}
	got := fetch.SniffImage(data)
	switch {
	case got == "":
		return &SkipError{Reason: SkipNotImage, Err: fmt.Errorf("%s is not an image file", it.File)}
	case im.enc == "bytes":
	case im.enc == "jpeg" || im.enc == "png":
		if got != im.enc {
			return &SkipError{Reason: SkipWrongType, Err: fmt.Errorf("%s is a %s image, the column is %s (choose --image-encoding pil or bytes to keep it)", it.File, got, im.enc)}
		}
		if err := fetch.CheckImage(data, im.enc); err != nil {
			return &SkipError{Reason: SkipBrokenImage, Err: fmt.Errorf("%s: %w", it.File, err)}
		}
	case im.enc == "pil":
		if err := fetch.CheckImage(data, ""); err != nil {
			return &SkipError{Reason: SkipBrokenImage, Err: fmt.Errorf("%s: %w", it.File, err)}
		}
		img, _, err := image.Decode(bytes.NewReader(data))
		if err != nil {
			return &SkipError{Reason: SkipBrokenImage, Err: fmt.Errorf("%s: %w", it.File, err)}
		}
		if data, err = im.pil.Append(nil, img); err != nil {
			return &SkipError{Reason: SkipBrokenImage, Err: fmt.Errorf("%s: %w", it.File, err)}
		}
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
	return readBounded(r, size)
}

// readLocal is readSized for a local file.
func readLocal(name string, size int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size <= 0 || size > MaxImageBytes {
		size = 0
	}
	return readBounded(f, size)
}

// readBounded reads r, expected to hold size bytes (0: unknown), with one
// exact allocation when it does, and at most MaxImageBytes.
func readBounded(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		b, err := io.ReadAll(io.LimitReader(r, MaxImageBytes+1))
		if err == nil && int64(len(b)) > MaxImageBytes {
			return nil, fmt.Errorf("larger than %d bytes", MaxImageBytes)
		}
		return b, err
	}
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
