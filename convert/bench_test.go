package convert

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// benchRecords returns n small JSON lines (about 90 bytes each).
func benchRecords(n int) []byte {
	var b bytes.Buffer
	b.Grow(n * 96)
	for i := range n {
		fmt.Fprintf(&b, `{"id": %d, "text": "sample text number %d for the benchmark", "label": %d}`+"\n", i, i, i%1000)
	}
	return b.Bytes()
}

func benchConvert(b *testing.B, in string, samples int, inputBytes int64, comp string) {
	b.Helper()
	reg := testRegistry()
	dir := b.TempDir()
	b.SetBytes(inputBytes)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		out := filepath.Join(dir, fmt.Sprint(i))
		i++
		rep, err := Run(b.Context(), &Options{Input: in, Output: out, Registry: reg, Compression: comp})
		if err != nil {
			b.Fatal(err)
		}
		if rep.SamplesOut != int64(samples) {
			b.Fatalf("wrote %d samples, want %d", rep.SamplesOut, samples)
		}
		b.StopTimer()
		os.RemoveAll(out)
		b.StartTimer()
	}
	b.ReportMetric(float64(samples)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkConvertJSONL converts small JSON records to MDS (1M records;
// 100k with -short).
func BenchmarkConvertJSONL(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	data := benchRecords(n)
	in := filepath.Join(b.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		b.Fatal(err)
	}
	for _, comp := range []string{"none", "zstd"} {
		b.Run(comp, func(b *testing.B) {
			c := comp
			if c == "none" {
				c = ""
			}
			benchConvert(b, in, n, int64(len(data)), c)
		})
	}
}

// noiseJPEG makes a JPEG of about 20 KB (noisy content compresses poorly).
func noiseJPEG(b *testing.B, rng *rand.Rand) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 160, 160))
	for y := range 160 {
		for x := range 160 {
			img.Set(x, y, color.RGBA{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkConvertImageFolder converts an image folder of ~20 KB JPEGs
// (5000 images; 1000 with -short).
func BenchmarkConvertImageFolder(b *testing.B) {
	n := 5000
	if testing.Short() {
		n = 1000
	}
	root := filepath.Join(b.TempDir(), "imgs")
	rng := rand.New(rand.NewPCG(1, 2))
	var total int64
	for i := range n {
		img := noiseJPEG(b, rng)
		total += int64(len(img))
		p := filepath.Join(root, fmt.Sprintf("class%02d", i%10), fmt.Sprintf("%06d.jpg", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, img, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d images, %.1f KB on average", n, float64(total)/float64(n)/1024)
	for _, comp := range []string{"none", "zstd"} {
		b.Run(comp, func(b *testing.B) {
			c := comp
			if c == "none" {
				c = ""
			}
			benchConvert(b, root, n, total, c)
		})
	}
}
