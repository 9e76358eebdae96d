package mds

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sluicedata/sluice/format"
)

const fixturesDir = "../../../shared/fixtures/mds"

// fixtureNames lists the reference datasets; the test fails if the
// fixtures directory exists but holds fewer than expected.
func fixtureNames(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir(fixturesDir)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("reference fixtures not available: %v", err) // CI always has ../shared beside the clone
		}
		t.Skipf("reference fixtures not available: %v", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) < 15 {
		t.Fatalf("only %d fixture datasets found", len(out))
	}
	return out
}

func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out
}

// jpegMeanTolerance is how far Go's JPEG decoder may differ from
// libjpeg-turbo in each band's mean (fixtures README: JPEG pixels are
// checked within a tolerance, raw bytes exactly).
const jpegMeanTolerance = 1.0 // observed: at most 0.27

// CompareDumpLine reports the first difference between a dump line and an
// expected.jsonl line. Lines must be equal byte for byte, except that JPEG
// pixel hashes are not compared and means are compared within tolerance,
// and pkl values are compared through raw_sha256 only.
func compareDumpLine(got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	if !bytes.Contains(want, []byte(`"JPEG"`)) && !bytes.Contains(want, []byte(`{"pkl": `)) {
		return fmt.Errorf("lines differ")
	}
	g, err := format.ParseJSON(got)
	if err != nil {
		return fmt.Errorf("got line does not parse: %v", err)
	}
	w, err := format.ParseJSON(want)
	if err != nil {
		return fmt.Errorf("want line does not parse: %v", err)
	}
	return compareValue("", g, w)
}

func compareValue(path string, g, w any) error {
	switch wv := w.(type) {
	case *format.JSONObject:
		gv, ok := g.(*format.JSONObject)
		if !ok {
			return fmt.Errorf("%s: got %T, want object", path, g)
		}
		if _, isPkl := wv.Values["pkl"]; isPkl && len(wv.Keys) == 1 {
			if _, ok := gv.Values["pkl_b64"]; ok {
				return nil // checked via raw_sha256
			}
		}
		isJPEG := wv.Values["format"] == "JPEG"
		if len(gv.Keys) != len(wv.Keys) {
			return fmt.Errorf("%s: keys %v, want %v", path, gv.Keys, wv.Keys)
		}
		for i, k := range wv.Keys {
			if gv.Keys[i] != k {
				return fmt.Errorf("%s: key %d is %q, want %q", path, i, gv.Keys[i], k)
			}
			if isJPEG && k == "pixels_sha256" {
				continue
			}
			if isJPEG && k == "pixels_mean" {
				ga, _ := gv.Values[k].([]any)
				wa, _ := wv.Values[k].([]any)
				if len(ga) != len(wa) {
					return fmt.Errorf("%s.pixels_mean: %d bands, want %d", path, len(ga), len(wa))
				}
				for b := range wa {
					x, _ := strconv.ParseFloat(string(ga[b].(format.JSONNumber)), 64)
					y, _ := strconv.ParseFloat(string(wa[b].(format.JSONNumber)), 64)
					if math.Abs(x-y) > jpegMeanTolerance {
						return fmt.Errorf("%s.pixels_mean[%d]: %v, want %v", path, b, x, y)
					}
				}
				continue
			}
			if err := compareValue(path+"."+k, gv.Values[k], wv.Values[k]); err != nil {
				return err
			}
		}
		return nil
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(wv) {
			return fmt.Errorf("%s: got %v, want %v", path, g, w)
		}
		for i := range wv {
			if err := compareValue(fmt.Sprintf("%s[%d]", path, i), gv[i], wv[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if fmt.Sprint(g) != fmt.Sprint(w) {
		return fmt.Errorf("%s: got %v, want %v", path, g, w)
	}
	return nil
}

func TestFixturesDecode(t *testing.T) {
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(fixturesDir, name, "data")
			want := readLines(t, filepath.Join(fixturesDir, name, "expected.jsonl"))
			r, err := Open(dir, &Options{AllowUnsafeTypes: true, ValidateHash: firstHash(t, dir)})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Len() != int64(len(want)) {
				t.Fatalf("%d samples, expected.jsonl has %d", r.Len(), len(want))
			}
			sc := r.RawScan(0)
			var line []byte
			for sc.Next() {
				i := sc.Index()
				line, err = AppendDump(line[:0], i, sc.ShardIndex(), sc.CurrentShard(), int(i-r.Offset(sc.ShardIndex())))
				if err != nil {
					t.Fatalf("sample %d: %v", i, err)
				}
				if err := compareDumpLine(line, want[i]); err != nil {
					t.Fatalf("sample %d: %v\n got %s\nwant %s", i, err, line, want[i])
				}
				// Random access agrees with the scan.
				s, err := r.Sample(i)
				if err != nil {
					t.Fatalf("Sample(%d): %v", i, err)
				}
				if len(s) != len(sc.CurrentShard().ColumnNames()) {
					t.Fatalf("Sample(%d) has %d columns", i, len(s))
				}
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func firstHash(t testing.TB, dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := format.ParseIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Shards) > 0 && len(idx.Shards[0].Hashes) > 0 {
		return idx.Shards[0].Hashes[0]
	}
	return ""
}
