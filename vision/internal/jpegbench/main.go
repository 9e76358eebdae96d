// Command jpegbench decodes a directory of JPEG samples with package
// vision on all cores (or -workers goroutines) and prints one JSON line:
// images, their ID sum (the guard that nothing was skipped), wall and CPU
// seconds. python/bench/jpeg.py runs it built with and without the
// libjpeg tag, beside PIL on the same files.
//
//	go run [-tags libjpeg] ./vision/internal/jpegbench -dir D [-passes 3] [-workers 0] [-transform rrc|decode]
//
// The files are <id>.jpg; every pass decodes all of them in batches of
// -batch, as epoch <pass>.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedata/sluice/internal/cputime"
	"github.com/sluicedata/sluice/vision"
	"github.com/sluicedata/sluice/vision/libjpeg"
)

type result struct {
	Decoder   string  `json:"decoder"`
	Transform string  `json:"transform"`
	Workers   int     `json:"workers"`
	Images    int     `json:"images"`
	IDSum     int64   `json:"id_sum"`
	PixSum    uint64  `json:"pix_sum"`
	Wall      float64 `json:"wall_s"`
	CPU       float64 `json:"cpu_s"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "jpegbench:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "directory of <id>.jpg files")
	passes := flag.Int("passes", 3, "passes over the files")
	workers := flag.Int("workers", 0, "decoding goroutines (0: GOMAXPROCS)")
	batch := flag.Int("batch", 32, "images per batch")
	transform := flag.String("transform", "rrc", "rrc (RandomResizedCrop 224 + flip, CHW) or decode (whole image, HWC)")
	full := flag.Bool("full-decode", false, "libjpeg: decode at full size (no DCT scaling)")
	flag.Parse()
	ents, err := os.ReadDir(*dir)
	if err != nil {
		return err
	}
	var ids []int64
	var srcs [][]byte
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".jpg")
		if !ok {
			continue
		}
		id, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: name is not <id>.jpg", e.Name())
		}
		b, err := os.ReadFile(filepath.Join(*dir, e.Name()))
		if err != nil {
			return err
		}
		ids = append(ids, id)
		srcs = append(srcs, b)
	}
	if len(srcs) == 0 {
		return fmt.Errorf("%s: no .jpg files", *dir)
	}
	sort.Sort(byID{ids, srcs})
	spec := vision.Spec{FullDecode: *full}
	switch *transform {
	case "rrc":
		spec = vision.Spec{Height: 224, Width: 224, RandomResizedCrop: true, Flip: true, Layout: vision.CHW, FullDecode: *full}
	case "decode":
	default:
		return fmt.Errorf("transform %q: want rrc or decode", *transform)
	}
	w := *workers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	res := result{Decoder: "go", Transform: *transform, Workers: w}
	if libjpeg.Available {
		res.Decoder = "libjpeg"
	}
	t0, c0 := time.Now(), cputime.Process().Seconds()
	d, err := vision.NewDecoder(spec, w)
	if err != nil {
		return err
	}
	if spec.Height > 0 {
		dst := make([]byte, *batch*d.ImageSize())
		for pass := range *passes {
			for i := 0; i < len(srcs); i += *batch {
				j := min(i+*batch, len(srcs))
				if err := d.DecodeBatch(dst, srcs[i:j], ids[i:j], int64(pass)); err != nil {
					return err
				}
				res.Images += j - i
				for _, id := range ids[i:j] {
					res.IDSum += id
				}
				res.PixSum += uint64(dst[(j-i)*d.ImageSize()/2])
			}
		}
	} else {
		// Whole images differ in size: one goroutine per worker, each
		// taking every w-th image.
		type part struct {
			n      int
			ids    int64
			pix    uint64
			failed error
		}
		for pass := range *passes {
			out := make(chan part, w)
			for k := range w {
				go func() {
					var p part
					var buf []byte
					for i := k; i < len(srcs); i += w {
						m, err := d.Decode(buf, srcs[i], int64(pass), ids[i])
						if err != nil {
							p.failed = err
							break
						}
						buf = m.Pix
						p.n++
						p.ids += ids[i]
						p.pix += uint64(m.Pix[len(m.Pix)/2])
					}
					out <- p
				}()
			}
			for range w {
				p := <-out
				if p.failed != nil {
					return p.failed
				}
				res.Images += p.n
				res.IDSum += p.ids
				res.PixSum += p.pix
			}
		}
	}
	res.Wall, res.CPU = time.Since(t0).Seconds(), cputime.Process().Seconds()-c0
	return json.NewEncoder(os.Stdout).Encode(res)
}

type byID struct {
	ids  []int64
	srcs [][]byte
}

func (b byID) Len() int           { return len(b.ids) }
func (b byID) Less(i, j int) bool { return b.ids[i] < b.ids[j] }
func (b byID) Swap(i, j int) {
	b.ids[i], b.ids[j] = b.ids[j], b.ids[i]
	b.srcs[i], b.srcs[j] = b.srcs[j], b.srcs[i]
}
