package vision

import (
	"runtime"
	"testing"

	"github.com/sluicedata/sluice/internal/cputime"
)

// benchImages returns 16 ImageNet-like JPEGs (500×375, quality 90).
func benchImages(b *testing.B) [][]byte {
	var out [][]byte
	for i := range 16 {
		m := photo(500, 375)
		m.Pix[i] ^= 0xff // distinct images
		out = append(out, encodeJPEG(b, m, 90))
	}
	return out
}

// BenchmarkDecode decodes one image at a time on one goroutine: decode
// only, and decode + RandomResizedCrop 224 + flip (the ImageNet training
// transform). cpu-ms/img is the cost per image on one core.
func BenchmarkDecode(b *testing.B) {
	imgs := benchImages(b)
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"decode", Spec{}},
		{"rrc224-flip", Spec{Height: 224, Width: 224, RandomResizedCrop: true, Flip: true, Layout: CHW}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var buf []byte
			sum := 0
			n := 0
			cpu := cputime.Process()
			for b.Loop() {
				m, err := Decode(buf, imgs[n%len(imgs)], &c.spec, 0, int64(n))
				if err != nil {
					b.Fatal(err)
				}
				buf = m.Pix
				sum += int(m.Pix[len(m.Pix)/2])
				n++
			}
			if n != b.N {
				b.Fatalf("decoded %d of %d", n, b.N)
			}
			b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N)/1e6, "cpu-ms/img")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "img/s")
			_ = sum
		})
	}
}

// BenchmarkDecodeBatch decodes batches of 64 on every core with the
// training transform into one CHW batch buffer.
func BenchmarkDecodeBatch(b *testing.B) {
	imgs := benchImages(b)
	d, err := NewDecoder(Spec{Height: 224, Width: 224, RandomResizedCrop: true, Flip: true, Layout: CHW}, 0)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 64
	srcs := make([][]byte, batch)
	ids := make([]int64, batch)
	dst := make([]byte, batch*d.ImageSize())
	cpu := cputime.Process()
	for i := 0; b.Loop(); i++ {
		for j := range batch {
			srcs[j] = imgs[(i+j)%len(imgs)]
			ids[j] = int64(i*batch + j)
		}
		if err := d.DecodeBatch(dst, srcs, ids, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N*batch)/1e6, "cpu-ms/img")
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "img/s")
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "cores")
}
