package stream_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format/compress"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/stream"
)

// zstdBomb returns a zstd frame of RLE blocks that decompresses to n
// bytes (a multiple of 128 KiB) of 'x': 4 bytes per 128 KiB, so 2 GiB
// take 64 KiB. The frame claims its content size when claim is true.
func zstdBomb(n int64, claim bool) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x28, 0xb5, 0x2f, 0xfd})
	if claim {
		b.WriteByte(0xe0) // FCS 8 bytes, single segment
		var fcs [8]byte
		binary.LittleEndian.PutUint64(fcs[:], uint64(n))
		b.Write(fcs[:])
	} else {
		b.WriteByte(0x00)
		b.WriteByte(7 << 3) // window 2^(10+7) = 128 KiB
	}
	const block = 128 << 10
	for left := n; left > 0; left -= block {
		last := uint32(0)
		if left <= block {
			last = 1
		}
		h := last | 1<<1 | uint32(block)<<3 // RLE block of 128 KiB
		b.Write([]byte{byte(h), byte(h >> 8), byte(h >> 16), 'x'})
	}
	return b.Bytes()
}

// bombDataset writes a one-shard zstd dataset into dir, then replaces the
// shard by bomb and makes the index claim raw bytes for it.
func bombDataset(t *testing.T, dir string, bomb []byte, raw int64) {
	t.Helper()
	writeDataset(t, dir, spec{samples: 10, payload: 10, compression: "zstd"})
	os.Remove(filepath.Join(dir, "shard.00000.mds"))
	if err := os.WriteFile(filepath.Join(dir, "shard.00000.mds.zstd"), bomb, 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "index.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var idx map[string]any
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	sh := idx["shards"].([]any)[0].(map[string]any)
	sh["zip_data"].(map[string]any)["bytes"] = len(bomb)
	sh["raw_data"].(map[string]any)["bytes"] = raw
	if b, err = json.Marshal(idx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// vmHWM returns this process's peak resident set in bytes.
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// runChild runs test in a fresh process of this test binary with env set
// and returns the lines it printed that start with "RESULT ".
func runChild(t *testing.T, test string, env ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", test, err, out)
	}
	var res []string
	for _, l := range strings.Split(string(out), "\n") {
		if r, ok := strings.CutPrefix(l, "RESULT "); ok {
			res = append(res, r)
		}
	}
	if len(res) == 0 {
		t.Fatalf("child %s printed no result:\n%s", test, out)
	}
	return res
}

// memBound is the peak RSS a child may reach: the test binary itself
// plus bounded buffers, far below the gigabytes a claim names.
const memBound = 256 << 20

// TestDecompressionBomb: a 64 KiB zstd shard whose data is 2 GiB. When
// the index claims 2 GiB it is refused at Open (ratio cap) before any
// space is reserved; when it claims 1 MiB, decompression stops at 1 MiB
// as bytes arrive and the failed shard leaves nothing in the cache; the
// in-memory decoder (sluice verify, local reads) and mds.Verify refuse
// the claim too.
// Peak memory is checked in a child process.
func TestDecompressionBomb(t *testing.T) {
	if dir := os.Getenv("SLUICE_TEST_BOMB_DIR"); dir != "" {
		bombChild(dir)
		return
	}
	bomb := zstdBomb(2<<30, true)
	big, small := t.TempDir(), t.TempDir()
	bombDataset(t, big, bomb, 2<<30)
	bombDataset(t, small, zstdBomb(2<<30, false), 1<<20)
	if len(bomb) > 70<<10 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	res := runChild(t, "TestDecompressionBomb", "SLUICE_TEST_BOMB_DIR="+big+string(os.PathListSeparator)+small)
	got := map[string]string{}
	for _, r := range res {
		k, v, _ := strings.Cut(r, " ")
		got[k] = v
	}
	if !strings.Contains(got["open-2g"], "compression ratio cap") || !strings.Contains(got["open-2g"], "shard.00000.mds.zstd") {
		t.Errorf("Open of a shard claiming 2 GiB from 64 KiB: %q, want the ratio cap naming the shard", got["open-2g"])
	}
	if !strings.Contains(got["get-1m"], "exceeds the declared size") && !strings.Contains(got["get-1m"], "exceeds the expected size") {
		t.Errorf("Get of a shard whose data outgrows its 1 MiB claim: %q", got["get-1m"])
	}
	if got["leftover-1m"] != "0" {
		t.Errorf("the failed shard left %s bytes of shard files in the cache", got["leftover-1m"])
	}
	if !strings.Contains(got["verify-2g"], "compression ratio cap") {
		t.Errorf("verify of a shard claiming 2 GiB: %q", got["verify-2g"])
	}
	if !strings.Contains(got["decompress-2g"], "compression ratio cap") {
		t.Errorf("Decompress claiming 2 GiB: %q", got["decompress-2g"])
	}
	if !strings.Contains(got["decompress-60m"], "exceeds the expected size") {
		t.Errorf("Decompress claiming 16 MiB of 2 GiB: %q", got["decompress-60m"])
	}
	hwm, _ := strconv.ParseInt(got["vmhwm"], 10, 64)
	if hwm <= 0 || hwm > raceMemFactor*memBound {
		t.Errorf("peak RSS %d bytes, want at most %d", hwm, memBound)
	}
	t.Logf("child: %v", got)
}

func bombChild(dirs string) {
	big, small, _ := strings.Cut(dirs, string(os.PathListSeparator))
	ctx := context.Background()
	say := func(k string, v any) { fmt.Printf("RESULT %s %v\n", k, v) }
	open := func(dir, cacheDir string) (*stream.Dataset, error) {
		return stream.Open(ctx, &stream.Options{Remote: "file://" + dir, Local: cacheDir, Registry: stores.Default(), Retry: fastRetry()})
	}
	c1, _ := os.MkdirTemp("", "bomb")
	defer os.RemoveAll(c1)
	_, err := open(big, c1)
	say("open-2g", err)
	c2, _ := os.MkdirTemp("", "bomb")
	defer os.RemoveAll(c2)
	ds, err := open(small, c2)
	if err != nil {
		say("get-1m", err)
	} else {
		_, err = ds.Get(ctx, 0)
		say("get-1m", err)
		ds.Close()
	}
	var left int64
	filepath.Walk(c2, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && strings.Contains(filepath.Base(p), "shard.") {
			left += fi.Size()
		}
		return nil
	})
	say("leftover-1m", left)
	var problems []string
	_, err = mds.Verify(ctx, big, func(err error) { problems = append(problems, err.Error()) })
	say("verify-2g", fmt.Sprint(err, problems))
	bomb := zstdBomb(2<<30, true)
	_, err = compress.Decompress("zstd", bomb, 2<<30)
	say("decompress-2g", err)
	_, err = compress.Decompress("zstd", zstdBomb(2<<30, false), 16<<20)
	if errors.Is(err, compress.ErrTooLarge) {
		err = fmt.Errorf("%w", err)
	}
	say("decompress-60m", err)
	say("vmhwm", vmHWM())
}

// TestEndlessIndex: a server whose index.json never ends is cut off at
// the index limit, with a clear error, holding no more than about the
// limit in memory (checked in a child process, at the default limit and
// at a configured one).
func TestEndlessIndex(t *testing.T) {
	if os.Getenv("SLUICE_TEST_ENDLESS_URL") != "" {
		endlessChild(os.Getenv("SLUICE_TEST_ENDLESS_URL"))
		return
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if _, err := io.WriteString(w, `{"version": 2, "shards": [`); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte(" "), 64<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	got := map[string]string{}
	for _, r := range runChild(t, "TestEndlessIndex", "SLUICE_TEST_ENDLESS_URL="+srv.URL+"/data") {
		k, v, _ := strings.Cut(r, " ")
		got[k] = v
	}
	for _, k := range []string{"open-16m", "open-default"} {
		if !strings.Contains(got[k], "index.json is larger than the limit") {
			t.Errorf("%s: %q, want the index limit", k, got[k])
		}
	}
	if !strings.Contains(got["open-16m"], "of 16777216 bytes") || !strings.Contains(got["open-default"], "of 268435456 bytes") {
		t.Errorf("errors do not name the limit: %v", got)
	}
	hwm16, _ := strconv.ParseInt(got["vmhwm-16m"], 10, 64)
	hwm, _ := strconv.ParseInt(got["vmhwm"], 10, 64)
	if hwm16 <= 0 || hwm16 > raceMemFactor*128<<20 {
		t.Errorf("peak RSS at a 16 MiB limit: %d bytes", hwm16)
	}
	if hwm <= 0 || hwm > raceMemFactor*(stream.DefaultMaxIndexBytes+256<<20) {
		t.Errorf("peak RSS at the default limit: %d bytes, want about the limit (%d)", hwm, stream.DefaultMaxIndexBytes)
	}
	t.Logf("child: %v", got)
}

func endlessChild(remote string) {
	ctx := context.Background()
	say := func(k string, v any) { fmt.Printf("RESULT %s %v\n", k, v) }
	for _, c := range []struct {
		name  string
		limit int64
	}{{"16m", 16 << 20}, {"default", 0}} {
		dir, _ := os.MkdirTemp("", "endless")
		_, err := stream.Open(ctx, &stream.Options{Remote: remote, Local: dir, Registry: stores.Default(), Retry: fastRetry(), MaxIndexBytes: c.limit})
		os.RemoveAll(dir)
		say("open-"+c.name, err)
		if c.limit > 0 {
			say("vmhwm-"+c.name, vmHWM())
		}
	}
	say("vmhwm", vmHWM())
}
