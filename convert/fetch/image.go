package fetch

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // decoders for re-encoding fetched images
	"image/jpeg"
	_ "image/png"

	"golang.org/x/image/draw"
)

// MaxPixels bounds the pixels of an image ImageTransform decodes, so a tiny
// file declaring huge dimensions cannot exhaust memory.
const MaxPixels = 100 << 20

// ImageTransform returns a Transform that decodes an image (JPEG, PNG or
// GIF), scales it down so that its longer side is at most maxSide pixels
// (0 keeps the size; images are never enlarged), and encodes it as JPEG at
// quality (1..100). A JPEG that needs no resizing is re-encoded only when
// reencode is true, so by default its original bytes are kept.
func ImageTransform(maxSide, quality int, reencode bool) (func([]byte) ([]byte, error), error) {
	if maxSide < 0 {
		return nil, fmt.Errorf("fetch: negative max side %d", maxSide)
	}
	if quality < 1 || quality > 100 {
		return nil, fmt.Errorf("fetch: JPEG quality %d out of range 1..100", quality)
	}
	return func(b []byte) ([]byte, error) {
		cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("decode image header: %w", err)
		}
		if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
			return nil, fmt.Errorf("image of %dx%d pixels out of bounds", cfg.Width, cfg.Height)
		}
		resize := maxSide > 0 && max(cfg.Width, cfg.Height) > maxSide
		if !resize && format == "jpeg" && !reencode {
			return b, nil
		}
		img, _, err := image.Decode(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", format, err)
		}
		if resize {
			w, h := cfg.Width, cfg.Height
			if w >= h {
				h = max(1, h*maxSide/w)
				w = maxSide
			} else {
				w = max(1, w*maxSide/h)
				h = maxSide
			}
			dst := image.NewRGBA(image.Rect(0, 0, w, h))
			draw.ApproxBiLinear.Scale(dst, dst.Bounds(), img, img.Bounds(), draw.Src, nil)
			img = dst
		}
		var out bytes.Buffer
		if err := jpeg.Encode(&out, img, &jpeg.Options{Quality: quality}); err != nil {
			return nil, fmt.Errorf("encode jpeg: %w", err)
		}
		if out.Len() == 0 {
			return nil, errors.New("encode jpeg: empty output")
		}
		return out.Bytes(), nil
	}, nil
}
