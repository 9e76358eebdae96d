package mds

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/sluicedata/sluice/format"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
)

// maxImagePixels is Pillow's decompression-bomb error threshold
// (2 × Image.MAX_IMAGE_PIXELS): larger images are refused before any pixel
// buffer is allocated.
const maxImagePixels = 178956970

// maxListImages bounds image list lengths read from untrusted data.
const maxListImages = 1 << 20

// modeBytes returns the tobytes() size of a w×h image in a Pillow mode, or
// -1 if the mode is not known.
func modeBytes(mode string, w, h int) int {
	switch mode {
	case "1":
		return (w + 7) / 8 * h
	case "L", "P":
		return w * h
	case "LA", "La", "PA", "I;16", "I;16B", "I;16L":
		return 2 * w * h
	case "RGB", "YCbCr", "LAB", "HSV":
		return 3 * w * h
	case "RGBA", "RGBa", "RGBX", "CMYK", "I", "F":
		return 4 * w * h
	}
	return -1
}

func decodePIL(b []byte) (*imageValue, error) {
	if len(b) < 12 {
		return nil, errors.New("pil value shorter than its 12-byte header")
	}
	w := binary.LittleEndian.Uint32(b)
	h := binary.LittleEndian.Uint32(b[4:])
	ml := binary.LittleEndian.Uint32(b[8:])
	if ml == 0 || ml > 16 || int(ml) > len(b)-12 {
		return nil, fmt.Errorf("pil mode length %d is invalid", ml)
	}
	mode := string(b[12 : 12+ml])
	pix := b[12+ml:]
	if uint64(w)*uint64(h) > maxImagePixels {
		return nil, fmt.Errorf("pil image %dx%d is too large", w, h)
	}
	n := modeBytes(mode, int(w), int(h))
	if n < 0 {
		return nil, fmt.Errorf("pil image has unsupported mode %q", mode)
	}
	if len(pix) != n {
		return nil, fmt.Errorf("pil %s image %dx%d needs %d pixel bytes, has %d", mode, w, h, n, len(pix))
	}
	return &imageValue{Mode: mode, Width: int(w), Height: int(h), Pix: append([]byte{}, pix...)}, nil
}

// pngMode returns Pillow's mode for a PNG from its IHDR bit depth and
// color type.
func pngMode(b []byte) (string, int, error) {
	if len(b) < 29 || string(b[12:16]) != "IHDR" {
		return "", 0, errors.New("png value has no IHDR chunk")
	}
	depth, ct := int(b[24]), b[25]
	switch ct {
	case 0:
		switch depth {
		case 1:
			return "1", depth, nil
		case 16:
			return "I", depth, nil
		}
		return "L", depth, nil
	case 2:
		return "RGB", depth, nil
	case 3:
		return "P", depth, nil
	case 4:
		return "LA", depth, nil
	case 6:
		return "RGBA", depth, nil
	}
	return "", 0, fmt.Errorf("png has unknown color type %d", ct)
}

func decodeEncodedImage(b []byte, want string) (*imageValue, error) {
	var cfg image.Config
	var err error
	if want == "PNG" {
		cfg, err = png.DecodeConfig(bytes.NewReader(b))
	} else {
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(b))
	}
	if err != nil {
		return nil, fmt.Errorf("%s value: %w", want, err)
	}
	if uint64(cfg.Width)*uint64(cfg.Height) > maxImagePixels {
		return nil, fmt.Errorf("%s image %dx%d is too large", want, cfg.Width, cfg.Height)
	}
	var img image.Image
	if want == "PNG" {
		img, err = png.Decode(bytes.NewReader(b))
	} else {
		img, err = jpeg.Decode(bytes.NewReader(b))
	}
	if err != nil {
		return nil, fmt.Errorf("%s value: %w", want, err)
	}
	v := &imageValue{Format: want, Encoded: append([]byte{}, b...)}
	r := img.Bounds()
	v.Width, v.Height = r.Dx(), r.Dy()
	if want == "PNG" {
		mode, _, err := pngMode(b)
		if err != nil {
			return nil, err
		}
		v.Mode = mode
		v.Pix = pixelsForMode(img, mode)
		return v, nil
	}
	switch img.(type) {
	case *image.Gray:
		v.Mode = "L"
	case *image.CMYK:
		v.Mode = "CMYK"
	default:
		v.Mode = "RGB"
	}
	v.Pix = pixelsForMode(img, v.Mode)
	return v, nil
}

// pixelsForMode lays out img's pixels as Pillow's tobytes() does for mode.
func pixelsForMode(img image.Image, mode string) []byte {
	r := img.Bounds()
	w, h := r.Dx(), r.Dy()
	out := make([]byte, 0, max(modeBytes(mode, w, h), 0))
	switch mode {
	case "P":
		if p, ok := img.(*image.Paletted); ok {
			for y := r.Min.Y; y < r.Max.Y; y++ {
				out = append(out, p.Pix[(y-r.Min.Y)*p.Stride:(y-r.Min.Y)*p.Stride+w]...)
			}
			return out
		}
		mode = "RGBA"
	case "CMYK":
		if c, ok := img.(*image.CMYK); ok {
			for y := r.Min.Y; y < r.Max.Y; y++ {
				out = append(out, c.Pix[(y-r.Min.Y)*c.Stride:(y-r.Min.Y)*c.Stride+4*w]...)
			}
			return out
		}
	case "1":
		for y := r.Min.Y; y < r.Max.Y; y++ {
			var acc byte
			for x := 0; x < w; x++ {
				g := color.GrayModel.Convert(img.At(r.Min.X+x, y)).(color.Gray)
				if g.Y >= 128 {
					acc |= 0x80 >> (x % 8)
				}
				if x%8 == 7 || x == w-1 {
					out = append(out, acc)
					acc = 0
				}
			}
		}
		return out
	case "I":
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				g := color.Gray16Model.Convert(img.At(x, y)).(color.Gray16)
				out = binary.LittleEndian.AppendUint32(out, uint32(g.Y))
			}
		}
		return out
	}
	if g, ok := img.(*image.Gray); ok && mode == "L" {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			out = append(out, g.Pix[(y-r.Min.Y)*g.Stride:(y-r.Min.Y)*g.Stride+w]...)
		}
		return out
	}
	if n, ok := img.(*image.NRGBA); ok && mode == "RGBA" {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			o := (y - r.Min.Y) * n.Stride
			out = append(out, n.Pix[o:o+4*w]...)
		}
		return out
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, ca := nrgbaAt(img, x, y)
			switch mode {
			case "L":
				out = append(out, cr)
			case "LA":
				// Gray+alpha PNGs decode to NRGBA with R=G=B.
				out = append(out, cr, ca)
			case "RGBA":
				out = append(out, cr, cg, cb, ca)
			default: // RGB
				out = append(out, cr, cg, cb)
			}
		}
	}
	return out
}

func decodeJPEGArray(b []byte) ([]*imageValue, error) {
	if len(b) < 4 {
		return nil, errors.New("jpeg_array value shorter than its count")
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 {
		return nil, errors.New("jpeg_array value is empty")
	}
	return decodeSized(b[4:], n, "JPEG", "jpeg_array")
}

func decodeSized(b []byte, n uint32, fmtName, what string) ([]*imageValue, error) {
	if n > maxListImages || uint64(n)*4 > uint64(len(b)) {
		return nil, fmt.Errorf("%s count %d exceeds its data", what, n)
	}
	sizes := b[:4*n]
	b = b[4*n:]
	out := make([]*imageValue, 0, n)
	for i := uint32(0); i < n; i++ {
		sz := binary.LittleEndian.Uint32(sizes[4*i:])
		if uint64(sz) > uint64(len(b)) {
			return nil, fmt.Errorf("%s item %d size %d exceeds the data", what, i, sz)
		}
		var v *imageValue
		var err error
		if fmtName == "PIL" {
			v, err = decodePIL(b[:sz])
		} else {
			v, err = decodeEncodedImage(b[:sz], fmtName)
		}
		if err != nil {
			return nil, fmt.Errorf("%s item %d: %w", what, i, err)
		}
		out = append(out, v)
		b = b[sz:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%s has %d trailing bytes", what, len(b))
	}
	return out, nil
}

func (e *Encoding) decodeImageList(b []byte) ([]*imageValue, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%s value shorter than its header", e.text)
	}
	if binary.LittleEndian.Uint32(b) != 0 {
		return nil, fmt.Errorf("%s value has a non-zero reserved field", e.text)
	}
	n := binary.LittleEndian.Uint32(b[4:])
	f := map[kind]string{kListPIL: "PIL", kListJPEG: "JPEG", kListPNG: "PNG"}[e.kind]
	return decodeSized(b[8:], n, f, e.text)
}

// encodeImage encodes one image value for jpeg, png or pil.
func encodeImage(dst []byte, k kind, v any) ([]byte, error) {
	var img image.Image
	switch v := v.(type) {
	case *imageValue:
		switch {
		case k == kJPEG && v.Format == "JPEG" && v.Encoded != nil:
			return append(dst, v.Encoded...), nil // as Pillow copies an opened JPEG
		case k == kPNG && v.Format == "PNG" && v.Encoded != nil:
			return append(dst, v.Encoded...), nil
		case k == kPIL:
			if n := modeBytes(v.Mode, v.Width, v.Height); n < 0 || n != len(v.Pix) {
				return nil, fmt.Errorf("pil image %dx%d %s has %d pixel bytes", v.Width, v.Height, v.Mode, len(v.Pix))
			}
			dst = binary.LittleEndian.AppendUint32(dst, uint32(v.Width))
			dst = binary.LittleEndian.AppendUint32(dst, uint32(v.Height))
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(v.Mode)))
			dst = append(dst, v.Mode...)
			return append(dst, v.Pix...), nil
		}
		var err error
		if img, err = stdImage(v); err != nil {
			return nil, err
		}
	case image.Image:
		img = v
	default:
		return nil, fmt.Errorf("cannot encode %T as an image", v)
	}
	var buf bytes.Buffer
	switch k {
	case kJPEG:
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 75}); err != nil {
			return nil, err
		}
	case kPNG:
		if err := png.Encode(&buf, img); err != nil {
			return nil, err
		}
	case kPIL:
		iv := fromStd(img)
		return encodeImage(dst, kPIL, iv)
	}
	return append(dst, buf.Bytes()...), nil
}

// fromStd converts a Go image to raw Pillow-layout pixels (L for gray, RGBA
// when any pixel is translucent, RGB otherwise).
func fromStd(img image.Image) *imageValue {
	r := img.Bounds()
	v := &imageValue{Width: r.Dx(), Height: r.Dy()}
	switch img.ColorModel() {
	case color.GrayModel, color.Gray16Model:
		v.Mode = "L"
	default:
		v.Mode = "RGB"
		if o, ok := img.(interface{ Opaque() bool }); ok && !o.Opaque() {
			v.Mode = "RGBA"
		}
	}
	v.Pix = pixelsForMode(img, v.Mode)
	return v
}

type imageValue = format.Image

// stdImage converts raw Pillow-layout pixels back to a Go image for
// re-encoding.
func stdImage(v *format.Image) (image.Image, error) {
	if n := modeBytes(v.Mode, v.Width, v.Height); n < 0 || n != len(v.Pix) {
		return nil, fmt.Errorf("image %dx%d %s has %d pixel bytes", v.Width, v.Height, v.Mode, len(v.Pix))
	}
	r := image.Rect(0, 0, v.Width, v.Height)
	switch v.Mode {
	case "L":
		return &image.Gray{Pix: v.Pix, Stride: v.Width, Rect: r}, nil
	case "RGBA":
		return &image.NRGBA{Pix: v.Pix, Stride: 4 * v.Width, Rect: r}, nil
	case "RGB", "LA":
		img := image.NewNRGBA(r)
		for i, j := 0, 0; j < len(img.Pix); j += 4 {
			if v.Mode == "RGB" {
				copy(img.Pix[j:j+3], v.Pix[i:i+3])
				img.Pix[j+3] = 255
				i += 3
			} else {
				img.Pix[j], img.Pix[j+1], img.Pix[j+2], img.Pix[j+3] = v.Pix[i], v.Pix[i], v.Pix[i], v.Pix[i+1]
				i += 2
			}
		}
		return img, nil
	}
	return nil, fmt.Errorf("cannot re-encode a %s image", v.Mode)
}

// nrgbaAt returns the non-premultiplied 8-bit color at (x, y), exact for
// the image types Go's decoders return (converting through the
// premultiplied color.RGBA64 would lose translucent values).
func nrgbaAt(img image.Image, x, y int) (r, g, b, a uint8) {
	switch c := img.At(x, y).(type) {
	case color.NRGBA:
		return c.R, c.G, c.B, c.A
	case color.NRGBA64:
		return uint8(c.R >> 8), uint8(c.G >> 8), uint8(c.B >> 8), uint8(c.A >> 8)
	case color.Gray:
		return c.Y, c.Y, c.Y, 255
	case color.Gray16:
		return uint8(c.Y >> 8), uint8(c.Y >> 8), uint8(c.Y >> 8), 255
	case color.RGBA:
		if c.A == 255 {
			return c.R, c.G, c.B, 255
		}
		n := color.NRGBAModel.Convert(c).(color.NRGBA)
		return n.R, n.G, n.B, n.A
	default:
		n := color.NRGBAModel.Convert(c).(color.NRGBA)
		return n.R, n.G, n.B, n.A
	}
}
