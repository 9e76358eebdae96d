package vision

import (
	"errors"
	"fmt"

	"github.com/sluicedata/sluice/vision/libjpeg"
)

// decodeTurbo decodes a JPEG with libjpeg-turbo: only the window of rows
// and columns the resampling reads, at the scale dctScale picks. ok is
// false, with no error, for a JPEG libjpeg cannot deliver as RGB (CMYK,
// YCCK), which the pure-Go decoder handles.
func decodeTurbo(dst, src []byte, spec *Spec, choose func(w, h int) plan, sc *scratch) (m Image, ok bool, err error) {
	d, err := libjpeg.Open(src)
	if err != nil {
		return m, true, turboErr(err)
	}
	defer d.Close()
	h := d.Header()
	if err := spec.checkPixels(h.Width, h.Height); err != nil {
		return m, true, err
	}
	if !h.RGB {
		return m, false, nil
	}
	p := choose(h.Width, h.Height)
	num := 8
	if !spec.FullDecode {
		num = dctScale(p)
	}
	sw, sh, err := d.Start(num, false)
	if err != nil {
		return m, true, turboErr(err)
	}
	win := sc.weights(sw, sh, p, float64(num)/8)
	sc.rgb = grow(sc.rgb, win.Dy()*sw*3)
	xoff, width, err := d.Read(sc.rgb, win.Min.X, win.Min.Y, win.Max.X, win.Max.Y)
	if err != nil {
		return m, true, turboErr(err)
	}
	sc.kx.shift(xoff)
	sc.ky.shift(win.Min.Y)
	// The resampling in C: the same arithmetic as resample, about three
	// times faster than the Go loops.
	n := p.oh * p.ow * 3
	if cap(dst) >= n {
		dst = dst[:n]
	} else {
		dst = make([]byte, n)
	}
	h2 := win.Dy()
	sc.tmp = grow(sc.tmp, p.ow*(h2+1)*3)
	kx := libjpeg.Weights{Start: sc.kx.start, N: sc.kx.n, K: sc.kx.k, Max: sc.kx.max, Identity: sc.kx.identity(width)}
	ky := libjpeg.Weights{Start: sc.ky.start, N: sc.ky.n, K: sc.ky.k, Max: sc.ky.max, Identity: sc.ky.identity(h2)}
	if err := libjpeg.Resample(dst, sc.rgb[:h2*width*3], sc.tmp, width, h2, p.ow, p.oh, &kx, &ky, p.flip, spec.Layout == CHW); err != nil {
		return m, true, err
	}
	return Image{Pix: dst, Height: p.oh, Width: p.ow, Crop: p.crop, Flipped: p.flip}, true, nil
}

func turboErr(err error) error {
	if errors.Is(err, libjpeg.ErrJPEG) {
		return fmt.Errorf("%w: %v", ErrImage, err)
	}
	return err
}

// dctScale returns the smallest N (of 1..8) for which the crop decoded at
// scale N/8 is still at least the output's size on both sides, so the
// resize only ever shrinks, as it would from the full-size decode.
func dctScale(p plan) int {
	for num := 1; num < 8; num++ {
		if p.crop.Dx()*num >= 8*p.ow && p.crop.Dy()*num >= 8*p.oh {
			return num
		}
	}
	return 8
}
