// Package libjpeg decodes JPEG images with the system's libjpeg-turbo
// (libjpeg62 API, cgo) when the program is built with the libjpeg build
// tag, for example `go build -tags libjpeg`. It decodes at a reduced size
// in the DCT domain (scale N/8) and only the rows and columns a crop needs,
// which is what makes decode + random-resized-crop cheaper than decoding
// the whole image.
//
// Without the tag (or without cgo) the package still compiles: Available
// is false and Open returns ErrUnavailable, so callers keep the pure-Go
// decoder and the default build stays static.
package libjpeg

import "errors"

// ErrUnavailable is returned by Open when the program was built without
// libjpeg-turbo (no libjpeg build tag, or cgo disabled).
var ErrUnavailable = errors.New("libjpeg: not built in (build with -tags libjpeg and cgo)")

// ErrJPEG is matched (errors.Is) by every error about the bytes of an
// image: not a JPEG, truncated, corrupt, too large, unsupported colours.
var ErrJPEG = errors.New("libjpeg: bad JPEG")

// Header is what a JPEG's header says about the image.
type Header struct {
	// Width and Height are the image's size in pixels.
	Width, Height int
	// Components is the number of colour components (1 gray, 3 YCbCr or
	// RGB, 4 CMYK/YCCK).
	Components int
	// RGB reports whether the decoder can deliver the image as RGB (gray,
	// YCbCr and RGB images; not CMYK or YCCK).
	RGB bool
}

// MaxScans bounds the scans of a progressive JPEG: a hostile file can
// otherwise make the decoder spend minutes on thousands of empty scans.
const MaxScans = 1000

// ScaledSize is the size libjpeg-turbo gives a w × h image decoded at
// scale num/8: each side rounded up.
func ScaledSize(w, h, num int) (sw, sh int) {
	return (w*num + 7) / 8, (h*num + 7) / 8
}
