package fetch

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
)

// ErrEncoding is matched (errors.Is) by every failure of a check made by
// CheckEncoding.
var ErrEncoding = errors.New("bytes do not match the column encoding")

// CheckEncoding returns a check of fetched bytes against an MDS column
// encoding, or nil when the encoding takes any bytes (bytes, str, ...).
//
//   - jpeg: the bytes must start like a JPEG file and decode fully as one;
//   - png: likewise for PNG;
//   - pil: the bytes must decode as an image of a format Go reads (JPEG,
//     PNG, GIF); the caller converts them.
//
// Every check first reads the header and refuses images of more than
// MaxPixels pixels before decoding, so a small file declaring huge
// dimensions cannot exhaust memory. A full decode finds truncated and
// corrupt files that a header check passes.
func CheckEncoding(enc string) func([]byte) error {
	switch enc {
	case "jpeg":
		return func(b []byte) error { return checkImage(b, "jpeg") }
	case "png":
		return func(b []byte) error { return checkImage(b, "png") }
	case "pil":
		return func(b []byte) error { return checkImage(b, "") }
	}
	return nil
}

var (
	jpegMagic = []byte{0xFF, 0xD8, 0xFF}
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
)

// SniffImage names the image format of b from its first bytes: "jpeg",
// "png", "gif", "webp", "bmp", "tiff", or "" when b starts like none.
func SniffImage(b []byte) string {
	switch {
	case bytes.HasPrefix(b, jpegMagic):
		return "jpeg"
	case bytes.HasPrefix(b, pngMagic):
		return "png"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "gif"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "webp"
	case bytes.HasPrefix(b, []byte("BM")) && len(b) >= 26:
		return "bmp"
	case bytes.HasPrefix(b, []byte("II*\x00")), bytes.HasPrefix(b, []byte("MM\x00*")):
		return "tiff"
	}
	return ""
}

// CheckImage decodes b fully as an image of format want ("jpeg", "png",
// or "" for any format Go decodes) and returns an error matching
// ErrEncoding when it does not decode.
func CheckImage(b []byte, want string) error { return checkImage(b, want) }

func checkImage(b []byte, want string) error {
	got := SniffImage(b)
	if got == "" {
		return fmt.Errorf("%w: not an image (starts %q)", ErrEncoding, head(b))
	}
	if want != "" && got != want {
		return fmt.Errorf("%w: a %s image, column wants %s", ErrEncoding, got, want)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%w: bad %s header: %w", ErrEncoding, got, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return fmt.Errorf("%w: %s of %dx%d pixels out of bounds", ErrEncoding, got, cfg.Width, cfg.Height)
	}
	switch got {
	case "jpeg":
		_, err = jpeg.Decode(bytes.NewReader(b))
	case "png":
		_, err = png.Decode(bytes.NewReader(b))
	default:
		_, _, err = image.Decode(bytes.NewReader(b))
	}
	if err != nil {
		return fmt.Errorf("%w: %s does not decode: %w", ErrEncoding, got, err)
	}
	return nil
}

func head(b []byte) []byte {
	if len(b) > 8 {
		return b[:8]
	}
	return b
}
