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
	return p.finish(sc, dst, sc.rgb[:win.Dy()*width*3], width, win.Dy(), spec.Layout), true, nil
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
