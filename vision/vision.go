// Package vision decodes image samples (JPEG, PNG) into uint8 pixel
// arrays for training, with the usual augmentations applied on the way:
// resize, random-resized-crop and horizontal flip. Random choices come from
// a per-sample seed (the spec's seed, the epoch and the sample ID), so a
// resumed run, or another world size, sees the same augmentation of a
// sample as the original run. DecodeBatch spreads a batch over all cores.
//
// The default build is pure Go (image/jpeg, image/png) and static. Built
// with the libjpeg tag (and cgo), JPEGs are decoded by libjpeg-turbo
// instead (package vision/libjpeg): only the rows and columns the crop's
// resampling reads, at the smallest DCT scale N/8 that still gives the
// crop at least the output's size. Nothing here does I/O.
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

	"github.com/sluicedata/sluice/vision/libjpeg"
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
	// FullDecode makes libjpeg-turbo decode at full size before the
	// resize, as PIL does (then the pixels are PIL's), instead of at the
	// smallest DCT scale that still covers the output (a little softer,
	// and faster when crops are large). The pure-Go decoder always decodes
	// at full size.
	FullDecode bool
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
	if sc == nil {
		sc = new(scratch)
	}
	choose := func(w, h int) plan { return spec.plan(w, h, epoch, sample) }
	if isJPEG(src) && libjpeg.Available {
		if m, ok, err := decodeTurbo(dst, src, spec, choose, sc); ok || err != nil {
			return m, err
		}
		// A CMYK or YCCK JPEG: libjpeg has no RGB conversion for it.
	}
	return decodeGo(dst, src, spec, choose, sc)
}

func isJPEG(src []byte) bool {
	return len(src) >= 3 && src[0] == 0xff && src[1] == 0xd8 && src[2] == 0xff
}

// decodeGo decodes with the standard library's decoders.
// choose gives the plan for an image of the size the header says.
func decodeGo(dst, src []byte, spec *Spec, choose func(w, h int) plan, sc *scratch) (Image, error) {
	var out Image
	var cfg image.Config
	var err error
	jpg := isJPEG(src)
	isPNG := len(src) >= 8 && string(src[:8]) == "\x89PNG\r\n\x1a\n"
	switch {
	case jpg:
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(src))
	case isPNG:
		cfg, err = png.DecodeConfig(bytes.NewReader(src))
	default:
		return out, fmt.Errorf("%w: not a JPEG or PNG (%d bytes)", ErrImage, len(src))
	}
	if err != nil {
		return out, fmt.Errorf("%w: %v", ErrImage, err)
	}
	if err := spec.checkPixels(cfg.Width, cfg.Height); err != nil {
		return out, err
	}
	var img image.Image
	if jpg {
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
	p := choose(b.Dx(), b.Dy())
	// The window of source pixels the resampling filter reads.
	win := sc.weights(b.Dx(), b.Dy(), p, 1)
	win = win.Add(b.Min)
	rgb := toRGB(sc, img, win)
	sc.kx.shift(win.Min.X - b.Min.X)
	sc.ky.shift(win.Min.Y - b.Min.Y)
	return p.finish(sc, dst, rgb, win.Dx(), win.Dy(), spec.Layout), nil
}

func (s *Spec) checkPixels(w, h int) error {
	if w <= 0 || h <= 0 || int64(w)*int64(h) > s.maxPixels() {
		return fmt.Errorf("%w: %d×%d pixels (limit %d)", ErrImage, w, h, s.maxPixels())
	}
	return nil
}

// plan is what the per-sample seed chose for one image: the crop (in the
// image's pixels), the flip, and the output size.
type plan struct {
	crop   image.Rectangle
	flip   bool
	ow, oh int
}

func (s *Spec) plan(w, h int, epoch, sample int64) plan {
	rng := newRNG(s.Seed, epoch, sample)
	b := image.Rect(0, 0, w, h)
	p := plan{crop: b}
	if s.RandomResizedCrop {
		p.crop = randomCrop(&rng, b, s.scale(), s.ratio())
	}
	p.flip = s.Flip && rng.float64() < 0.5
	p.oh, p.ow = p.crop.Dy(), p.crop.Dx()
	if s.Height > 0 {
		p.oh, p.ow = s.Height, s.Width
	}
	return p
}

// weights computes the resampling weights of the plan's crop for an image
// of w × h decoded at scale f (the crop's coordinates times f) and
// returns the window of the decoded image they read.
func (sc *scratch) weights(w, h int, p plan, f float64) image.Rectangle {
	c := p.crop
	sc.kx.compute(w, float64(c.Min.X)*f, float64(c.Max.X)*f, p.ow)
	sc.ky.compute(h, float64(c.Min.Y)*f, float64(c.Max.Y)*f, p.oh)
	x0, x1 := sc.kx.span()
	y0, y1 := sc.ky.span()
	return image.Rect(x0, y0, x1, y1)
}

// finish resamples the packed RGB window (w × h, the weights shifted to
// it) into the output.
func (p plan) finish(sc *scratch, dst, rgb []byte, w, h int, layout Layout) Image {
	n := p.oh * p.ow * 3
	if cap(dst) >= n {
		dst = dst[:n]
	} else {
		dst = make([]byte, n)
	}
	resample(sc, dst, rgb, w, h, p.ow, p.oh, p.flip, layout)
	return Image{Pix: dst, Height: p.oh, Width: p.ow, Crop: p.crop, Flipped: p.flip}
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
