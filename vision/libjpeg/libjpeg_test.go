//go:build libjpeg && cgo

package libjpeg

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func fixture(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var names = []string{"gray", "odd", "progressive", "yuv420", "yuv422", "yuv444"}

// decodeAll decodes the whole image at scale num/8.
func decodeAll(t *testing.T, src []byte, num int) (pix []byte, w, h int) {
	d, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w, h, err = d.Start(num, false)
	if err != nil {
		t.Fatal(err)
	}
	hd := d.Header()
	if sw, sh := ScaledSize(hd.Width, hd.Height, num); sw != w || sh != h {
		t.Fatalf("scale %d/8 of %d×%d: decoded %d×%d, ScaledSize says %d×%d", num, hd.Width, hd.Height, w, h, sw, sh)
	}
	pix = make([]byte, w*h*3)
	xoff, width, err := d.Read(pix, 0, 0, w, h)
	if err != nil || xoff != 0 || width != w {
		t.Fatalf("full read: %v (xoff %d width %d of %d)", err, xoff, width, w)
	}
	return pix, w, h
}

// TestWindowMatchesWhole decodes windows of rows and columns at every
// scale and compares them with the same pixels of the whole decode: the
// columns libjpeg widens to hold the window, and the pixels are equal
// (they were not at the window's edge columns of subsampled images before
// Read widened the crop by a column on each side).
func TestWindowMatchesWhole(t *testing.T) {
	for _, name := range names {
		src := fixture(t, name+".jpg")
		for num := 1; num <= 8; num++ {
			whole, w, h := decodeAll(t, src, num)
			for _, win := range [][4]int{{w / 4, h / 3, w/4 + w/2, h/3 + h/2}, {1, 1, 2, 2}, {0, h / 2, w, h}, {w - 1, 0, w, h}} {
				x0, y0, x1, y1 := win[0], win[1], max(win[2], win[0]+1), max(win[3], win[1]+1)
				d, err := Open(src)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := d.Start(num, false); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, (y1-y0)*w*3)
				xoff, width, err := d.Read(buf, x0, y0, x1, y1)
				d.Close()
				if err != nil {
					t.Fatalf("%s %d/8 window %v: %v", name, num, win, err)
				}
				if xoff > x0 || xoff+width < x1 || xoff+width > w {
					t.Fatalf("%s %d/8 window %v: columns [%d, %d)", name, num, win, xoff, xoff+width)
				}
				for y := y0; y < y1; y++ {
					for x := x0; x < x1; x++ {
						for c := range 3 {
							got := int(buf[((y-y0)*width+x-xoff)*3+c])
							want := int(whole[(y*w+x)*3+c])
							if got != want {
								t.Errorf("%s %d/8 window %v: (%d, %d) channel %d = %d, whole decode %d", name, num, win, x, y, c, got, want)
							}
						}
					}
				}
			}
		}
	}
}

func TestHeader(t *testing.T) {
	for name, want := range map[string]Header{
		"gray.jpg":   {Width: 96, Height: 72, Components: 1, RGB: true},
		"odd.jpg":    {Width: 61, Height: 47, Components: 3, RGB: true},
		"cmyk.jpg":   {Width: 40, Height: 30, Components: 4, RGB: false},
		"yuv444.jpg": {Width: 96, Height: 72, Components: 3, RGB: true},
	} {
		d, err := Open(fixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Header(); got != want {
			t.Errorf("%s: header %+v, want %+v", name, got, want)
		}
		d.Close()
	}
}

func TestRejects(t *testing.T) {
	good := fixture(t, "yuv420.jpg")
	for name, src := range map[string][]byte{
		"empty": nil, "text": []byte("hello, not a jpeg"), "header only": good[:40],
		"soi only": {0xff, 0xd8, 0xff},
	} {
		d, err := Open(src)
		if err == nil {
			d.Close()
			t.Errorf("%s: opened", name)
		} else if !errors.Is(err, ErrJPEG) {
			t.Errorf("%s: %v does not match ErrJPEG", name, err)
		}
	}
	// Truncated in the entropy-coded data: the header reads, the decode
	// fails (libjpeg alone would pad it with gray).
	d, err := Open(good[:len(good)*2/3])
	if err != nil {
		t.Fatal(err)
	}
	w, h, err := d.Start(8, false)
	if err == nil {
		_, _, err = d.Read(make([]byte, w*h*3), 0, 0, w, h)
	}
	d.Close()
	if !errors.Is(err, ErrJPEG) {
		t.Fatalf("truncated: %v", err)
	}
	// CMYK has no RGB conversion.
	d, err = Open(fixture(t, "cmyk.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Start(8, false); !errors.Is(err, ErrJPEG) {
		t.Fatalf("cmyk start: %v", err)
	}
	d.Close()
	// Misuse: bad scale, Read before Start, window outside, small buffer.
	d, err = Open(good)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, _, err := d.Read(make([]byte, 1<<20), 0, 0, 1, 1); err == nil {
		t.Error("read before start")
	}
	if _, _, err := d.Start(0, false); err == nil {
		t.Error("scale 0/8 accepted")
	}
	w, h, err = d.Start(8, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Read(make([]byte, w*h*3), 0, 0, w+1, h); err == nil {
		t.Error("window wider than the image accepted")
	}
	if _, _, err := d.Read(make([]byte, 10), 0, 0, w, h); err == nil {
		t.Error("small buffer accepted")
	}
}

// TestFastIsClose: the fast IDCT without fancy upsampling is near the
// accurate decode.
func TestFastIsClose(t *testing.T) {
	src := fixture(t, "yuv420.jpg")
	acc, w, h := decodeAll(t, src, 8)
	d, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, _, err := d.Start(8, true); err != nil {
		t.Fatal(err)
	}
	fast := make([]byte, w*h*3)
	if _, _, err := d.Read(fast, 0, 0, w, h); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(fast, acc) {
		t.Fatal("fast decode identical to the accurate one: settings not applied")
	}
	sum := 0
	for i := range fast {
		sum += max(int(fast[i])-int(acc[i]), int(acc[i])-int(fast[i]))
	}
	if mean := float64(sum) / float64(len(fast)); mean > 4 {
		t.Fatalf("fast decode off by %.2f on average", mean)
	}
}

// FuzzDecode runs arbitrary bytes through Open, Start and Read: no crash
// (libjpeg's errors come back as ErrJPEG), no hang.
func FuzzDecode(f *testing.F) {
	for _, name := range append(names, "cmyk") {
		f.Add(fixture(f, name+".jpg"), uint8(8))
	}
	f.Add([]byte{0xff, 0xd8, 0xff, 0xe0}, uint8(3))
	f.Fuzz(func(t *testing.T, src []byte, num uint8) {
		d, err := Open(src)
		if err != nil {
			if !errors.Is(err, ErrJPEG) {
				t.Fatalf("open: %v", err)
			}
			return
		}
		defer d.Close()
		h := d.Header()
		if int64(h.Width)*int64(h.Height) > 1<<20 || !h.RGB {
			return
		}
		w, hh, err := d.Start(int(num%8)+1, num&8 != 0)
		if err != nil {
			if !errors.Is(err, ErrJPEG) {
				t.Fatalf("start: %v", err)
			}
			return
		}
		x0, y0 := int(num)%w, int(num)%hh
		_, _, err = d.Read(make([]byte, (hh-y0)*w*3), x0, y0, w, hh)
		if err != nil && !errors.Is(err, ErrJPEG) {
			t.Fatalf("read: %v", err)
		}
	})
}
