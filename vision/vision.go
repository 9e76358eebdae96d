// Package vision decodes image samples (JPEG, PNG) into uint8 pixel
// arrays for training, with the usual augmentations applied on the way:
// resize, random-resized-crop and horizontal flip. Random choices come from
// a per-sample seed (the spec's seed, the epoch and the sample ID), so a
// resumed run, or another world size, sees the same augmentation of a
// sample as the original run. DecodeBatch spreads a batch over all cores.
//
// It is pure Go (image/jpeg, image/png): the default static build needs no
// C library. Nothing here does I/O.
package vision

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"math"
	"math/bits"
)

// Layout is the order of the output array's dimensions.
type Layout int

const (
	// HWC is height × width × channel (PIL, numpy).
	HWC Layout = iota
	// CHW is channel × height × width (torch).
	CHW
)

// DefaultMaxPixels bounds the decoded size of one image (width × height)
// when Spec.MaxPixels is 0: 64 Mpx, 192 MB of RGB.
const DefaultMaxPixels = 1 << 26

// ErrImage is matched (errors.Is) by every error about an image's bytes:
// not an image, truncated, too large.
var ErrImage = errors.New("bad image")

// Spec says how to turn encoded images into arrays. The zero value decodes
// to RGB HWC at the image's own size.
type Spec struct {
	// Layout is HWC or CHW.
	Layout Layout
	// Height and Width, when both are set, are the output size: the image
	// (or its random crop) is resized to exactly that. With neither set
	// and no crop the output has the image's size.
	Height, Width int
	// RandomResizedCrop crops a random area of the image before the
	// resize, as torchvision's RandomResizedCrop does: area fraction in
	// Scale, aspect ratio (width/height) log-uniform in Ratio, ten tries,
	// then a centre crop. It needs Height and Width.
	RandomResizedCrop bool
	// Scale is the crop's area fraction range; zero means [0.08, 1].
	Scale [2]float64
	// Ratio is the crop's aspect ratio range; zero means [3/4, 4/3].
	Ratio [2]float64
	// Flip flips the output horizontally with probability one half.
	Flip bool
	// Seed is mixed with the epoch and the sample ID into each sample's
	// random choices.
	Seed uint64
	// MaxPixels bounds an image's width × height; 0 means
	// DefaultMaxPixels. Larger images fail before being decoded.
	MaxPixels int64
}

// Check reports whether the spec is usable.
func (s *Spec) Check() error {
	switch {
	case s.Layout != HWC && s.Layout != CHW:
		return fmt.Errorf("vision: unknown layout %d", s.Layout)
	case s.Height < 0 || s.Width < 0 || (s.Height == 0) != (s.Width == 0):
		return fmt.Errorf("vision: output size %d×%d: set both or neither", s.Height, s.Width)
	case int64(s.Height)*int64(s.Width) > s.maxPixels():
		return fmt.Errorf("vision: output size %d×%d exceeds %d pixels", s.Height, s.Width, s.maxPixels())
	case s.RandomResizedCrop && s.Height == 0:
		return errors.New("vision: RandomResizedCrop needs an output size")
	}
	sc, ra := s.scale(), s.ratio()
	if !(sc[0] > 0 && sc[0] <= sc[1] && sc[1] <= 1) {
		return fmt.Errorf("vision: scale %v: want 0 < lo ≤ hi ≤ 1", sc)
	}
	if !(ra[0] > 0 && ra[0] <= ra[1] && !math.IsInf(ra[1], 0)) {
		return fmt.Errorf("vision: ratio %v: want 0 < lo ≤ hi", ra)
	}
	return nil
}

func (s *Spec) maxPixels() int64 {
	if s.MaxPixels > 0 {
		return s.MaxPixels
	}
	return DefaultMaxPixels
}

func (s *Spec) scale() [2]float64 {
	if s.Scale == [2]float64{} {
		return [2]float64{0.08, 1}
	}
	return s.Scale
}

func (s *Spec) ratio() [2]float64 {
	if s.Ratio == [2]float64{} {
		return [2]float64{3.0 / 4, 4.0 / 3}
	}
	return s.Ratio
}

// FixedSize reports the output's height and width when every image has
// the same (Height and Width set), for batching.
func (s *Spec) FixedSize() (h, w int, ok bool) {
	return s.Height, s.Width, s.Height > 0
}

// Image is a decoded sample: Pix holds Height × Width × 3 bytes (RGB) in
// the spec's layout.
type Image struct {
	Pix           []byte
	Height, Width int
	// Crop is the source rectangle that was resized (the whole image
	// without a crop), and Flipped whether the output was flipped: what the
	// per-sample seed chose.
	Crop    image.Rectangle
	Flipped bool
}

// Size returns the size of the output array in bytes.
func (m *Image) Size() int { return m.Height * m.Width * 3 }

// Decode decodes one encoded image (JPEG or PNG) and applies the spec for
// the sample with this epoch and ID, writing the pixels into dst when it
// is large enough (else into a new slice).
func Decode(dst, src []byte, spec *Spec, epoch, sample int64) (Image, error) {
	if err := spec.Check(); err != nil {
		return Image{}, err
	}
	return decode(dst, src, spec, epoch, sample, nil)
}

func decode(dst, src []byte, spec *Spec, epoch, sample int64, sc *scratch) (Image, error) {
	var out Image
	var cfg image.Config
	var err error
	isJPEG := len(src) >= 3 && src[0] == 0xff && src[1] == 0xd8 && src[2] == 0xff
	isPNG := len(src) >= 8 && string(src[:8]) == "\x89PNG\r\n\x1a\n"
	switch {
	case isJPEG:
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(src))
	case isPNG:
		cfg, err = png.DecodeConfig(bytes.NewReader(src))
	default:
		return out, fmt.Errorf("%w: not a JPEG or PNG (%d bytes)", ErrImage, len(src))
	}
	if err != nil {
		return out, fmt.Errorf("%w: %v", ErrImage, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > spec.maxPixels() {
		return out, fmt.Errorf("%w: %d×%d pixels (limit %d)", ErrImage, cfg.Width, cfg.Height, spec.maxPixels())
	}
	var img image.Image
	if isJPEG {
		img, err = jpeg.Decode(bytes.NewReader(src))
	} else {
		img, err = png.Decode(bytes.NewReader(src))
	}
	if err != nil {
		return out, fmt.Errorf("%w: %v", ErrImage, err)
	}
	b := img.Bounds()
	if b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return out, fmt.Errorf("%w: decoded %v, header says %d×%d", ErrImage, b, cfg.Width, cfg.Height)
	}
	rng := newRNG(spec.Seed, epoch, sample)
	crop := b
	if spec.RandomResizedCrop {
		crop = randomCrop(&rng, b, spec.scale(), spec.ratio())
	}
	flip := spec.Flip && rng.float64() < 0.5
	oh, ow := crop.Dy(), crop.Dx()
	if spec.Height > 0 {
		oh, ow = spec.Height, spec.Width
	}
	n := oh * ow * 3
	if cap(dst) >= n {
		dst = dst[:n]
	} else {
		dst = make([]byte, n)
	}
	if sc == nil {
		sc = new(scratch)
	}
	rgb := toRGB(sc, img, crop)
	resample(sc, dst, rgb, crop.Dx(), crop.Dy(), ow, oh, flip, spec.Layout)
	return Image{Pix: dst, Height: oh, Width: ow, Crop: crop, Flipped: flip}, nil
}

// randomCrop is torchvision's RandomResizedCrop.get_params.
func randomCrop(r *rng, b image.Rectangle, scale, ratio [2]float64) image.Rectangle {
	W, H := b.Dx(), b.Dy()
	area := float64(W * H)
	lr0, lr1 := math.Log(ratio[0]), math.Log(ratio[1])
	for range 10 {
		target := area * (scale[0] + r.float64()*(scale[1]-scale[0]))
		ar := math.Exp(lr0 + r.float64()*(lr1-lr0))
		w := int(math.Round(math.Sqrt(target * ar)))
		h := int(math.Round(math.Sqrt(target / ar)))
		if w > 0 && h > 0 && w <= W && h <= H {
			i := r.intn(H - h + 1)
			j := r.intn(W - w + 1)
			return image.Rect(b.Min.X+j, b.Min.Y+i, b.Min.X+j+w, b.Min.Y+i+h)
		}
	}
	// Fallback: the centre crop with the ratio clamped into range.
	in := float64(W) / float64(H)
	w, h := W, H
	if in < ratio[0] {
		h = int(math.Round(float64(w) / ratio[0]))
	} else if in > ratio[1] {
		w = int(math.Round(float64(h) * ratio[1]))
	}
	w, h = max(min(w, W), 1), max(min(h, H), 1)
	i, j := (H-h)/2, (W-w)/2
	return image.Rect(b.Min.X+j, b.Min.Y+i, b.Min.X+j+w, b.Min.Y+i+h)
}

// rng is SplitMix64 over a seed mixed from (seed, epoch, sample): cheap,
// and the same draws for a sample wherever and whenever it is decoded.
type rng struct{ s uint64 }

func newRNG(seed uint64, epoch, sample int64) rng {
	r := rng{seed ^ 0x5175_1ce0_d1ce_0001}
	r.s = r.next() ^ uint64(epoch)
	r.s = r.next() ^ uint64(sample)
	r.next()
	return r
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// float64 returns a uniform draw in [0, 1).
func (r *rng) float64() float64 { return float64(r.next()>>11) / (1 << 53) }

// intn returns a uniform draw in [0, n) for n > 0.
func (r *rng) intn(n int) int {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int(hi)
}
