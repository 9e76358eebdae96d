package vision

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicedata/sluice/vision/libjpeg"
)

// The fixtures of testdata/gen.py: JPEGs written by PIL and PIL's pixels
// for them, full decodes and resizes of boxes.
type fixture struct {
	Name          string
	Width, Height int
	Boxes         []struct {
		Box  [4]int
		Size [2]int
	}
}

func fixtures(t testing.TB) []fixture {
	b, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fs []fixture
	if err := json.Unmarshal(b, &fs); err != nil {
		t.Fatal(err)
	}
	if len(fs) < 6 {
		t.Fatalf("%d fixtures", len(fs))
	}
	return fs
}

func readFixture(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Ext(name) != ".gz" {
		return b
	}
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pixelDiff returns the mean and the largest absolute difference of two
// equally long byte arrays.
func pixelDiff(t testing.TB, got, want []byte) (mean float64, most int) {
	if len(got) != len(want) {
		t.Fatalf("%d bytes, want %d", len(got), len(want))
	}
	sum := 0
	for i := range got {
		d := int(got[i]) - int(want[i])
		if d < 0 {
			d = -d
		}
		sum += d
		most = max(most, d)
	}
	return float64(sum) / float64(len(got)), most
}

// decoders are the ways this build decodes a JPEG for a given plan.
func decoders() map[string]func(src []byte, p plan) (Image, error) {
	withPlan := func(p plan) func(w, h int) plan { return func(w, h int) plan { return p } }
	m := map[string]func(src []byte, p plan) (Image, error){
		"go": func(src []byte, p plan) (Image, error) {
			return decodeGo(nil, src, &Spec{}, withPlan(p), new(scratch))
		},
	}
	if libjpeg.Available {
		for name, full := range map[string]bool{"libjpeg-full": true, "libjpeg-dct": false} {
			m[name] = func(src []byte, p plan) (Image, error) {
				img, ok, err := decodeTurbo(nil, src, &Spec{FullDecode: full}, withPlan(p), new(scratch))
				if err == nil && !ok {
					t := "not decoded as RGB"
					return img, &BatchError{Err: errorString(t)}
				}
				return img, err
			}
		}
	}
	return m
}

type errorString string

func (e errorString) Error() string { return string(e) }

// Tolerances against PIL per decoder, mean and largest absolute
// difference per byte (measured: go up to 4.4 / 27 on the odd-sized 4:2:0
// fixture, libjpeg-dct up to 1.9 / 12). libjpeg at full size is PIL's own
// decode (the same library and settings) and the same resampler: exact. The pure-Go
// decoder upsamples chroma without libjpeg's smoothing ("fancy
// upsampling") and rounds its IDCT differently. A reduced DCT scale
// resamples a different (smaller, smoother) decode of the same image.
var pilTolerance = map[string]struct {
	full, resized   float64
	fullMax, resMax int
}{
	"go":           {full: 5, resized: 5, fullMax: 32, resMax: 32},
	"libjpeg-full": {full: 0, resized: 0, fullMax: 0, resMax: 0},
	"libjpeg-dct":  {full: 0, resized: 2.5, fullMax: 0, resMax: 16},
}

// TestMatchesPIL decodes PIL's fixture JPEGs with every decoder of this
// build, whole and resized from boxes, and compares with PIL's pixels.
func TestMatchesPIL(t *testing.T) {
	for _, f := range fixtures(t) {
		src := readFixture(t, f.Name+".jpg")
		full := readFixture(t, f.Name+".full.rgb.gz")
		for name, dec := range decoders() {
			tol := pilTolerance[name]
			whole := image.Rect(0, 0, f.Width, f.Height)
			m, err := dec(src, plan{crop: whole, ow: f.Width, oh: f.Height})
			if err != nil {
				t.Fatalf("%s %s: %v", name, f.Name, err)
			}
			mean, most := pixelDiff(t, m.Pix, full)
			t.Logf("%-12s %-11s full      mean %.3f max %d", name, f.Name, mean, most)
			if mean > tol.full || most > tol.fullMax {
				t.Errorf("%s %s: full decode differs from PIL by mean %.3f, max %d", name, f.Name, mean, most)
			}
			for i, b := range f.Boxes {
				p := plan{crop: image.Rect(b.Box[0], b.Box[1], b.Box[2], b.Box[3]), ow: b.Size[0], oh: b.Size[1]}
				m, err := dec(src, p)
				if err != nil {
					t.Fatalf("%s %s box %d: %v", name, f.Name, i, err)
				}
				want := readFixture(t, f.Name+"."+string(rune('0'+i))+".rgb.gz")
				mean, most := pixelDiff(t, m.Pix, want)
				t.Logf("%-12s %-11s %v->%v mean %.3f max %d", name, f.Name, b.Box, b.Size, mean, most)
				if mean > tol.resized || most > tol.resMax {
					t.Errorf("%s %s box %v -> %v: differs from PIL by mean %.3f, max %d", name, f.Name, b.Box, b.Size, mean, most)
				}
			}
		}
	}
}

// TestCMYKFallsBack: a CMYK JPEG (no RGB conversion in libjpeg) decodes
// through the pure-Go decoder in every build.
func TestCMYKFallsBack(t *testing.T) {
	src := readFixture(t, "cmyk.jpg")
	want := readFixture(t, "cmyk.full.rgb.gz")
	m, err := Decode(nil, src, &Spec{}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Width != 40 || m.Height != 30 {
		t.Fatalf("%d×%d", m.Width, m.Height)
	}
	mean, most := pixelDiff(t, m.Pix, want)
	t.Logf("cmyk vs PIL: mean %.3f max %d", mean, most)
	if mean > 5 {
		t.Fatalf("cmyk differs from PIL by mean %.3f, max %d", mean, most)
	}
}

// TestDrawsMatchPythonPort: vision draws the crops and flips that
// python/sluice/images.py (the PIL path of DecodeImage) draws, recorded
// in testdata/draws.json by testdata/draws.py.
func TestDrawsMatchPythonPort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "draws.json"))
	if err != nil {
		t.Fatal(err)
	}
	var draws []struct {
		Seed          string
		Epoch, Sample int64
		W, H          int
		Scale, Ratio  [2]float64
		Box           [4]int
		Flip          bool
	}
	if err := json.Unmarshal(b, &draws); err != nil {
		t.Fatal(err)
	}
	if len(draws) < 100 {
		t.Fatalf("%d draws", len(draws))
	}
	for _, d := range draws {
		var seed uint64
		if _, err := fmt.Sscan(d.Seed, &seed); err != nil {
			t.Fatal(err)
		}
		s := Spec{Height: 8, Width: 8, RandomResizedCrop: true, Flip: true, Seed: seed, Scale: d.Scale, Ratio: d.Ratio}
		p := s.plan(d.W, d.H, d.Epoch, d.Sample)
		want := image.Rect(d.Box[0], d.Box[1], d.Box[2], d.Box[3])
		if p.crop != want || p.flip != d.Flip {
			t.Fatalf("seed %d epoch %d sample %d of %d×%d: vision draws %v flip %v, Python %v flip %v",
				seed, d.Epoch, d.Sample, d.W, d.H, p.crop, p.flip, want, d.Flip)
		}
	}
}
