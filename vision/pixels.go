package vision

import (
	"image"
	"image/color"
	"math"
)

// scratch holds a worker's reusable buffers.
type scratch struct {
	rgb, tmp []byte
	kx, ky   coeffs
}

func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]byte, n)
}

// toRGB converts the rectangle r of img to packed RGB (alpha is
// dropped, as PIL's convert("RGB") does).
func toRGB(s *scratch, img image.Image, r image.Rectangle) []byte {
	w, h := r.Dx(), r.Dy()
	s.rgb = grow(s.rgb, w*h*3)
	out := s.rgb
	switch m := img.(type) {
	case *image.YCbCr:
		var hs, vs int
		switch m.SubsampleRatio {
		case image.YCbCrSubsampleRatio422:
			hs = 1
		case image.YCbCrSubsampleRatio420:
			hs, vs = 1, 1
		case image.YCbCrSubsampleRatio440:
			vs = 1
		case image.YCbCrSubsampleRatio411:
			hs = 2
		case image.YCbCrSubsampleRatio410:
			hs, vs = 2, 1
		}
		o := 0
		for y := r.Min.Y; y < r.Max.Y; y++ {
			yrow := m.Y[(y-m.Rect.Min.Y)*m.YStride:]
			crow := (y>>vs - m.Rect.Min.Y>>vs) * m.CStride
			for x := r.Min.X; x < r.Max.X; x++ {
				ci := crow + x>>hs - m.Rect.Min.X>>hs
				rr, gg, bb := color.YCbCrToRGB(yrow[x-m.Rect.Min.X], m.Cb[ci], m.Cr[ci])
				out[o], out[o+1], out[o+2] = rr, gg, bb
				o += 3
			}
		}
	case *image.Gray:
		o := 0
		for y := r.Min.Y; y < r.Max.Y; y++ {
			row := m.Pix[m.PixOffset(r.Min.X, y):]
			for x := range w {
				v := row[x]
				out[o], out[o+1], out[o+2] = v, v, v
				o += 3
			}
		}
	case *image.RGBA:
		copy4to3(out, m.Pix, m.Stride, m.PixOffset(r.Min.X, r.Min.Y), w, h)
	case *image.NRGBA:
		copy4to3(out, m.Pix, m.Stride, m.PixOffset(r.Min.X, r.Min.Y), w, h)
	default:
		o := 0
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
				out[o], out[o+1], out[o+2] = c.R, c.G, c.B
				o += 3
			}
		}
	}
	return out
}

func copy4to3(out, pix []byte, stride, off, w, h int) {
	o := 0
	for y := range h {
		row := pix[off+y*stride:]
		for x := range w {
			out[o], out[o+1], out[o+2] = row[4*x], row[4*x+1], row[4*x+2]
			o += 3
		}
	}
}

// coeffs are one axis's resampling weights, PIL's bilinear (triangle)
// filter with the support widened by the downscale factor (antialiasing),
// in 22-bit fixed point.
type coeffs struct {
	start []int32 // first input index per output index
	n     []int32 // taps per output index
	k     []int32 // taps, stride max
	max   int
}

const precision = 22

// compute sets the weights that resample the span [in0, in1) of an axis
// of in samples to out samples, as PIL's resize with a box does: the
// filter may read samples outside the span, inside the axis.
func (c *coeffs) compute(in int, in0, in1 float64, out int) {
	scale := (in1 - in0) / float64(out)
	fs := max(scale, 1)
	support := fs
	c.max = int(math.Ceil(support))*2 + 1
	c.start = c.start[:0]
	c.n = c.n[:0]
	c.k = append(c.k[:0], make([]int32, out*c.max)...)
	var w [64]float64
	ww := w[:0]
	if c.max > len(w) {
		ww = make([]float64, 0, c.max)
	}
	for xx := range out {
		center := in0 + (float64(xx)+0.5)*scale
		lo := max(int(center-support+0.5), 0)
		hi := min(int(center+support+0.5), in)
		hi = max(min(hi, lo+c.max), lo)
		ww = ww[:0]
		sum := 0.0
		for x := lo; x < hi; x++ {
			d := (float64(x) - center + 0.5) / fs
			if d < 0 {
				d = -d
			}
			v := 0.0
			if d < 1 {
				v = 1 - d
			}
			ww = append(ww, v)
			sum += v
		}
		for i, v := range ww {
			if sum != 0 {
				v /= sum
			}
			kv := v * (1 << precision)
			if kv < 0 {
				kv -= 0.5
			} else {
				kv += 0.5
			}
			c.k[xx*c.max+i] = int32(kv)
		}
		c.start = append(c.start, int32(lo))
		c.n = append(c.n, int32(hi-lo))
	}
}

// span returns the input samples [lo, hi) the weights read.
func (c *coeffs) span() (lo, hi int) {
	lo, hi = int(c.start[0]), 0
	for i, s := range c.start {
		lo = min(lo, int(s))
		hi = max(hi, int(s+c.n[i]))
	}
	return lo, max(hi, lo+1)
}

// shift makes the weights index an input that starts at sample off.
func (c *coeffs) shift(off int) {
	for i := range c.start {
		c.start[i] -= int32(off)
	}
}

// identity reports whether the weights copy in samples one to one.
func (c *coeffs) identity(in int) bool {
	if len(c.start) != in {
		return false
	}
	for i, s := range c.start {
		if int(s) != i || c.n[i] != 1 && c.k[i*c.max+1] != 0 || c.k[i*c.max] != 1<<precision {
			return false
		}
	}
	return true
}

func clip8(v int32) byte {
	v = (v + 1<<(precision-1)) >> precision
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}

// resample resizes packed RGB src (w × h) to ow × oh into dst in the given
// layout with the weights in s.kx and s.ky (computed and shifted to src),
// flipping horizontally if asked.
func resample(s *scratch, dst, src []byte, w, h, ow, oh int, flip bool, layout Layout) {
	// Horizontal pass: src (w×h) -> tmp (ow×h).
	tmp := src
	if !s.kx.identity(w) {
		s.tmp = grow(s.tmp, ow*h*3)
		tmp = s.tmp
		for y := range h {
			row := src[y*w*3 : (y+1)*w*3]
			orow := tmp[y*ow*3 : (y+1)*ow*3]
			for x := range ow {
				st, n := int(s.kx.start[x]), int(s.kx.n[x])
				k := s.kx.k[x*s.kx.max : x*s.kx.max+n]
				var r, g, b int32
				p := row[st*3 : (st+n)*3]
				for i, kv := range k {
					r += int32(p[3*i]) * kv
					g += int32(p[3*i+1]) * kv
					b += int32(p[3*i+2]) * kv
				}
				orow[3*x], orow[3*x+1], orow[3*x+2] = clip8(r), clip8(g), clip8(b)
			}
		}
	}
	// Vertical pass: tmp (ow×h) -> output (ow×oh), with flip and layout.
	put := func(y, x int, r, g, b byte) {
		if flip {
			x = ow - 1 - x
		}
		if layout == CHW {
			plane := ow * oh
			i := y*ow + x
			dst[i], dst[plane+i], dst[2*plane+i] = r, g, b
			return
		}
		i := (y*ow + x) * 3
		dst[i], dst[i+1], dst[i+2] = r, g, b
	}
	if s.ky.identity(h) {
		for y := range oh {
			row := tmp[y*ow*3:]
			for x := range ow {
				put(y, x, row[3*x], row[3*x+1], row[3*x+2])
			}
		}
		return
	}
	stride := ow * 3
	for y := range oh {
		st, n := int(s.ky.start[y]), int(s.ky.n[y])
		k := s.ky.k[y*s.ky.max : y*s.ky.max+n]
		for x := range ow {
			var r, g, b int32
			o := st*stride + 3*x
			for _, kv := range k {
				r += int32(tmp[o]) * kv
				g += int32(tmp[o+1]) * kv
				b += int32(tmp[o+2]) * kv
				o += stride
			}
			put(y, x, clip8(r), clip8(g), clip8(b))
		}
	}
}
