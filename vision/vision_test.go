package vision

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"testing"

	"github.com/sluicedata/sluice/vision/libjpeg"
)

// photo draws a smooth, photo-like test image.
func photo(w, h int) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			fx, fy := float64(x)/float64(w), float64(y)/float64(h)
			m.Set(x, y, color.RGBA{
				uint8(127 + 120*math.Sin(7*fx+3*fy)),
				uint8(127 + 120*math.Cos(5*fy*fx+2*fx)),
				uint8((x*3 + y*5) % 256), 255})
		}
	}
	return m
}

func encodeJPEG(t testing.TB, m image.Image, q int) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: q}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodePNG(t testing.TB, m image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDecodePlain(t *testing.T) {
	m := photo(64, 48)
	got, err := Decode(nil, encodePNG(t, m), &Spec{}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Height != 48 || got.Width != 64 || len(got.Pix) != 64*48*3 {
		t.Fatalf("size %d×%d, %d bytes", got.Height, got.Width, len(got.Pix))
	}
	for y := range 48 {
		for x := range 64 {
			c := m.RGBAAt(x, y)
			i := (y*64 + x) * 3
			if got.Pix[i] != c.R || got.Pix[i+1] != c.G || got.Pix[i+2] != c.B {
				t.Fatalf("pixel (%d, %d) = %v, want %v", x, y, got.Pix[i:i+3], c)
			}
		}
	}
	// JPEG: the stdlib decoder's own colour conversion, pixel for pixel
	// (libjpeg-turbo's is compared with PIL in TestMatchesPIL).
	if libjpeg.Available {
		return
	}
	src := encodeJPEG(t, m, 90)
	got, err = Decode(nil, src, &Spec{}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := jpeg.Decode(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	for y := range 48 {
		for x := range 64 {
			r, g, b, _ := ref.At(x, y).RGBA()
			i := (y*64 + x) * 3
			if got.Pix[i] != byte(r>>8) || got.Pix[i+1] != byte(g>>8) || got.Pix[i+2] != byte(b>>8) {
				t.Fatalf("JPEG pixel (%d, %d) = %v, want %v %v %v", x, y, got.Pix[i:i+3], r>>8, g>>8, b>>8)
			}
		}
	}
}

// TestResizeMatchesReference checks the fixed-point separable resampler
// against a direct float evaluation of the same antialiased triangle
// filter.
func TestResizeMatchesReference(t *testing.T) {
	m := photo(97, 61)
	for _, sz := range [][2]int{{30, 20}, {200, 150}, {97, 61}, {13, 60}} {
		ow, oh := sz[0], sz[1]
		got, err := Decode(nil, encodePNG(t, m), &Spec{Width: ow, Height: oh}, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		ref := refResize(m, ow, oh)
		for i := range ref {
			if d := int(got.Pix[i]) - int(ref[i]); d < -2 || d > 2 {
				t.Fatalf("%d×%d: byte %d = %d, reference %d", ow, oh, i, got.Pix[i], ref[i])
			}
		}
	}
}

func refWeights(in, out int) [][2][]float64 {
	scale := float64(in) / float64(out)
	fs := math.Max(scale, 1)
	res := make([][2][]float64, out)
	for o := range out {
		c := (float64(o) + 0.5) * scale
		var xs, ws []float64
		sum := 0.0
		for x := range in {
			d := math.Abs((float64(x) + 0.5 - c) / fs)
			if d < 1 {
				xs = append(xs, float64(x))
				ws = append(ws, 1-d)
				sum += 1 - d
			}
		}
		for i := range ws {
			ws[i] /= sum
		}
		res[o] = [2][]float64{xs, ws}
	}
	return res
}

func refResize(m *image.RGBA, ow, oh int) []byte {
	w, h := m.Bounds().Dx(), m.Bounds().Dy()
	kx, ky := refWeights(w, ow), refWeights(h, oh)
	tmp := make([]float64, ow*h*3)
	for y := range h {
		for x := range ow {
			for i, sx := range kx[x][0] {
				c := m.RGBAAt(int(sx), y)
				k := kx[x][1][i]
				tmp[(y*ow+x)*3] += k * float64(c.R)
				tmp[(y*ow+x)*3+1] += k * float64(c.G)
				tmp[(y*ow+x)*3+2] += k * float64(c.B)
			}
		}
	}
	for i := range tmp {
		tmp[i] = math.Round(math.Min(math.Max(tmp[i], 0), 255))
	}
	out := make([]byte, ow*oh*3)
	for y := range oh {
		for x := range ow {
			for ch := range 3 {
				v := 0.0
				for i, sy := range ky[y][0] {
					v += ky[y][1][i] * tmp[(int(sy)*ow+x)*3+ch]
				}
				out[(y*ow+x)*3+ch] = byte(math.Round(math.Min(math.Max(v, 0), 255)))
			}
		}
	}
	return out
}

func TestAugmentDeterministic(t *testing.T) {
	src := encodeJPEG(t, photo(300, 200), 90)
	spec := &Spec{Height: 64, Width: 64, RandomResizedCrop: true, Flip: true, Seed: 7}
	// Whole decodes: the same sample decodes the same, twice.
	for id := range int64(20) {
		a, err := Decode(nil, src, spec, 3, id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Decode(nil, src, spec, 3, id)
		if err != nil {
			t.Fatal(err)
		}
		if a.Crop != b.Crop || a.Flipped != b.Flipped || !bytes.Equal(a.Pix, b.Pix) {
			t.Fatalf("sample %d: two decodes differ", id)
		}
	}
	// The draws themselves, for many samples: crops inside the image, in
	// the scale and ratio ranges, varied; flips about half.
	crops := map[image.Rectangle]bool{}
	flips := 0
	bounds := image.Rect(0, 0, 300, 200)
	for id := range int64(1000) {
		r := newRNG(spec.Seed, 3, id)
		c := randomCrop(&r, bounds, spec.scale(), spec.ratio())
		r2 := newRNG(spec.Seed, 3, id)
		if c2 := randomCrop(&r2, bounds, spec.scale(), spec.ratio()); c2 != c {
			t.Fatalf("sample %d: crops %v and %v", id, c, c2)
		}
		if !c.In(bounds) || c.Empty() {
			t.Fatalf("sample %d: crop %v outside the image", id, c)
		}
		frac := float64(c.Dx()*c.Dy()) / (300 * 200)
		ratio := float64(c.Dx()) / float64(c.Dy())
		if frac < 0.07 || frac > 1 || ratio < 0.7 || ratio > 1.4 {
			t.Fatalf("sample %d: crop %v area %.3f ratio %.3f", id, c, frac, ratio)
		}
		crops[c] = true
		if r.float64() < 0.5 {
			flips++
		}
	}
	if len(crops) < 900 || flips < 420 || flips > 580 {
		t.Fatalf("%d distinct crops and %d flips in 1000 samples", len(crops), flips)
	}
	// Another epoch draws other crops; another seed too.
	a, _ := Decode(nil, src, spec, 3, 5)
	b, _ := Decode(nil, src, spec, 4, 5)
	spec2 := *spec
	spec2.Seed = 8
	c, _ := Decode(nil, src, &spec2, 3, 5)
	if a.Crop == b.Crop && a.Crop == c.Crop {
		t.Fatal("epoch and seed do not change the crop")
	}
}

func TestFlipAndLayout(t *testing.T) {
	src := encodePNG(t, photo(40, 30))
	base := Spec{Height: 20, Width: 25}
	a, err := Decode(nil, src, &base, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Find a sample whose flip is drawn.
	fs := base
	fs.Flip = true
	var f Image
	for id := int64(0); ; id++ {
		if f, err = Decode(nil, src, &fs, 0, id); err != nil {
			t.Fatal(err)
		}
		if f.Flipped {
			break
		}
	}
	cs := base
	cs.Layout = CHW
	c, err := Decode(nil, src, &cs, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for y := range 20 {
		for x := range 25 {
			for ch := range 3 {
				v := a.Pix[(y*25+x)*3+ch]
				if f.Pix[(y*25+24-x)*3+ch] != v {
					t.Fatalf("flip differs at (%d, %d)", x, y)
				}
				if c.Pix[ch*500+y*25+x] != v {
					t.Fatalf("CHW differs at (%d, %d, %d)", ch, y, x)
				}
			}
		}
	}
}

func TestDecodeKinds(t *testing.T) {
	g := image.NewGray(image.Rect(0, 0, 8, 8))
	for i := range g.Pix {
		g.Pix[i] = uint8(i * 3)
	}
	n := image.NewNRGBA(image.Rect(0, 0, 8, 8))
	for i := range n.Pix {
		n.Pix[i] = uint8(i)
	}
	p := image.NewPaletted(image.Rect(0, 0, 8, 8), color.Palette{color.RGBA{1, 2, 3, 255}, color.RGBA{9, 8, 7, 255}})
	p.Pix[5] = 1
	for name, c := range map[string]struct {
		src  []byte
		want func(x, y int) [3]byte
	}{
		"gray png":  {encodePNG(t, g), func(x, y int) [3]byte { v := g.GrayAt(x, y).Y; return [3]byte{v, v, v} }},
		"nrgba png": {encodePNG(t, n), func(x, y int) [3]byte { c := n.NRGBAAt(x, y); return [3]byte{c.R, c.G, c.B} }},
		"paletted": {encodePNG(t, p), func(x, y int) [3]byte {
			r, gg, b, _ := p.At(x, y).RGBA()
			return [3]byte{byte(r >> 8), byte(gg >> 8), byte(b >> 8)}
		}},
	} {
		got, err := Decode(nil, c.src, &Spec{}, 0, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for y := range 8 {
			for x := range 8 {
				w := c.want(x, y)
				if [3]byte(got.Pix[(y*8+x)*3:]) != w {
					t.Fatalf("%s: (%d, %d) = %v want %v", name, x, y, got.Pix[(y*8+x)*3:(y*8+x)*3+3], w)
				}
			}
		}
	}
	gj, err := Decode(nil, encodeJPEG(t, g, 95), &Spec{Height: 4, Width: 4}, 0, 0)
	if err != nil || len(gj.Pix) != 48 {
		t.Fatalf("gray jpeg: %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := encodeJPEG(t, photo(32, 32), 90)
	// A PNG header claiming 100000×100000 pixels.
	huge := encodePNG(t, photo(4, 4))
	copy(huge[16:24], []byte{0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0})
	for name, src := range map[string][]byte{
		"empty": nil, "text": []byte("hello"), "truncated": good[:len(good)/2], "header only": good[:20],
		"huge": huge,
	} {
		_, err := Decode(nil, src, &Spec{}, 0, 0)
		if !errors.Is(err, ErrImage) {
			t.Errorf("%s: error %v does not match ErrImage", name, err)
		}
	}
	if _, err := Decode(nil, good, &Spec{Height: 0, Width: 0, RandomResizedCrop: true}, 0, 0); err == nil {
		t.Error("RandomResizedCrop without a size accepted")
	}
	if _, err := Decode(nil, good, &Spec{Height: 10}, 0, 0); err == nil {
		t.Error("height without width accepted")
	}
	if _, err := Decode(nil, good, &Spec{Height: 10, Width: 10, Scale: [2]float64{0.5, 0.1}}, 0, 0); err == nil {
		t.Error("inverted scale accepted")
	}
}

func TestDecodeBatch(t *testing.T) {
	spec := Spec{Height: 32, Width: 48, RandomResizedCrop: true, Flip: true, Layout: CHW, Seed: 1}
	var srcs [][]byte
	var ids []int64
	for i := range 24 {
		srcs = append(srcs, encodeJPEG(t, photo(60+i*7, 50+i*3), 80))
		ids = append(ids, int64(1000+i))
	}
	d, err := NewDecoder(spec, 4)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, len(srcs)*d.ImageSize())
	if err := d.DecodeBatch(dst, srcs, ids, 2); err != nil {
		t.Fatal(err)
	}
	for i := range srcs {
		one, err := Decode(nil, srcs[i], &spec, 2, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(one.Pix, dst[i*d.ImageSize():(i+1)*d.ImageSize()]) {
			t.Fatalf("image %d differs from a single decode", i)
		}
	}
	srcs[5] = []byte("bad")
	err = d.DecodeBatch(dst, srcs, ids, 2)
	var be *BatchError
	if !errors.As(err, &be) || be.Index != 5 || be.Sample != 1005 || !errors.Is(err, ErrImage) {
		t.Fatalf("bad image: %v", err)
	}
	free, err := NewDecoder(Spec{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := free.DecodeBatch(dst, srcs, ids, 2); err == nil {
		t.Fatal("batch without a fixed size accepted")
	}
	// Decode with the decoder's scratch: the same as the package's.
	for i := range 3 {
		one, err := Decode(nil, srcs[i], &spec, 2, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		two, err := d.Decode(nil, srcs[i], 2, ids[i])
		if err != nil || !bytes.Equal(one.Pix, two.Pix) {
			t.Fatalf("image %d: Decoder.Decode differs (%v)", i, err)
		}
	}
}

// FuzzDecode decodes arbitrary bytes: never a panic, errors match
// ErrImage, the output has the spec's size.
func FuzzDecode(f *testing.F) {
	f.Add(encodeJPEG(f, photo(16, 12), 70))
	f.Add(encodePNG(f, photo(9, 7)))
	f.Fuzz(func(t *testing.T, b []byte) {
		spec := &Spec{Height: 8, Width: 6, RandomResizedCrop: true, Flip: true, MaxPixels: 1 << 20}
		m, err := Decode(nil, b, spec, 0, int64(len(b)))
		if err != nil {
			if !errors.Is(err, ErrImage) {
				t.Fatalf("error %v does not match ErrImage", err)
			}
			return
		}
		if len(m.Pix) != 8*6*3 {
			t.Fatalf("%d bytes", len(m.Pix))
		}
	})
}
