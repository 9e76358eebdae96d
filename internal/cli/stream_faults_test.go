package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/mds"
	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// writeStreamDataset writes n samples (id, 100 bytes) into dir.
func writeStreamDataset(t *testing.T, dir string, n int, compression string) {
	t.Helper()
	w, err := mds.NewWriter(dir, &mds.WriterOptions{Columns: map[string]string{"id": "int", "pad": "bytes"},
		SizeLimit: 2500, Compression: compression})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		pad := make([]byte, 100)
		for j := range pad {
			pad[j] = byte(i*7 + j*13)
		}
		if err := w.Write(format.Sample{"id": int64(i), "pad": pad}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// listing returns "name size" for every file under dir.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			out = append(out, fmt.Sprintf("%s %d", p, fi.Size()))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// TestStreamDirWritesNothingIntoSource: `sluice stream DIR` of a
// compressed dataset without --local decompresses into a cache under the
// temp directory, never beside the source shards.
func TestStreamDirWritesNothingIntoSource(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir := t.TempDir()
	writeStreamDataset(t, dir, 200, "zstd")
	before := listing(t, dir)
	out, err := streamRunCLI(t, "stream", dir, "--batch-size", "4", "--json")
	if err != nil {
		t.Fatalf("stream: %v\n%s", err, out)
	}
	var r struct{ Samples int64 }
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Samples != 200 {
		t.Fatalf("streamed %d samples (%v): %s", r.Samples, err, out)
	}
	if after := listing(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("the source changed:\nbefore %v\nafter  %v", before, after)
	}
}

// TestStreamSaveStateSurvivesKill: with --save-state the state is written
// atomically every --save-every samples, so a run killed with SIGKILL
// leaves a state that resumes with exactly the samples not yet seen.
func TestStreamSaveStateSurvivesKill(t *testing.T) {
	if args := os.Getenv("SLUICE_TEST_STREAM_CHILD"); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		err := Run(context.Background(), argv, os.Stdout, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir, state := t.TempDir(), filepath.Join(t.TempDir(), "state.json")
	const n = 400
	writeStreamDataset(t, dir, n, "")
	args := []string{"stream", dir, "--batch-size", "1", "--step-time", "10ms", "--save-state", state, "--save-every", "10", "--json"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStreamSaveStateSurvivesKill$")
	argv, _ := json.Marshal(args)
	cmd.Env = append(os.Environ(), "SLUICE_TEST_STREAM_CHILD="+string(argv))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var st plan.State
	for {
		if b, err := os.ReadFile(state); err == nil {
			if st, err = plan.ParseState(b); err != nil {
				t.Fatalf("state file mid-run is not a valid state: %v\n%s", err, b)
			}
			if st.SampleInEpoch >= 30 {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatal("no state written before the deadline")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if st, err = plan.ParseState(b); err != nil {
		t.Fatalf("state after SIGKILL: %v\n%s", err, b)
	}
	if st.SampleInEpoch <= 0 || st.SampleInEpoch >= n || st.SampleInEpoch%10 != 0 {
		t.Fatalf("state after SIGKILL at sample %d", st.SampleInEpoch)
	}
	out, err := streamRunCLI(t, "stream", dir, "--batch-size", "1", "--resume", state, "--json")
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	var r struct{ Samples int64 }
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Samples != n-st.SampleInEpoch {
		t.Errorf("resumed run streamed %d samples, want %d (%v)", r.Samples, n-st.SampleInEpoch, err)
	}
}

// TestStreamCLIThroughS3Faults: `sluice stream` against the real S3
// server through a proxy failing 30% of requests with each kind of fault
// (503 SlowDown, resets and truncations mid-body, stalls: about 76% of
// requests fail once or more) streams the whole epoch; at 100%
// it fails naming the URL, operation, attempts and cause.
func TestStreamCLIThroughS3Faults(t *testing.T) {
	const n = 600
	srv, remote, _, proxy := datasetBehindFaultProxy(t, "cli-stream-faults", n, "zstd")
	get := func(r *http.Request) bool { return r.Method == http.MethodGet }
	rate := func(p float64, seed uint64) func(*http.Request) bool {
		m := storagetest.Rate(p, seed)
		return func(r *http.Request) bool { return get(r) && m(r) }
	}
	proxy.Inject(
		storagetest.ProxyFault{Kind: storagetest.Status, Status: 503, Body: storagetest.SlowDownBody, Match: storagetest.Rate(0.3, 1)},
		storagetest.ProxyFault{Kind: storagetest.Reset, AfterBytes: 200, Match: rate(0.3, 2)},
		storagetest.ProxyFault{Kind: storagetest.Truncate, AfterBytes: 200, Match: rate(0.3, 3)},
		storagetest.ProxyFault{Kind: storagetest.Stall, AfterBytes: 200, Match: rate(0.3, 4)},
	)
	fast := []string{"--retry-attempts", "16", "--retry-backoff", "1ms", "--retry-max-backoff", "20ms", "--retry-throttle-backoff", "5ms",
		"--stall-timeout", "150ms", "--batch-size", "4", "--json"}
	out, err := streamRunCLI(t, append([]string{"stream", remote, "--local", t.TempDir()}, fast...)...)
	if err != nil {
		t.Fatalf("stream through 30%% faults: %v\n%s", err, out)
	}
	var r struct{ Samples, Downloads int64 }
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Samples != n {
		t.Fatalf("streamed %d samples, want %d (%v)", r.Samples, n, err)
	}
	if proxy.Injected(storagetest.Status) == 0 {
		t.Error("no fault injected")
	}

	proxy.Clear()
	proxy.Inject(storagetest.ProxyFault{Kind: storagetest.Status, Status: 503, Body: storagetest.SlowDownBody})
	fast[1] = "3"
	_, err = streamRunCLI(t, append([]string{"stream", remote, "--local", t.TempDir()}, fast...)...)
	if err == nil {
		t.Fatal("stream at 100% faults succeeded")
	}
	for _, want := range []string{"get", "index.json", "giving up after 3 attempts", "SlowDown", srv.Bucket} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestStreamWarnsOfRedownloads: under a cache limit far below what a
// whole-dataset shuffle needs, `sluice stream` says once that it
// downloaded several times the dataset, and which limit would avoid it.
func TestStreamWarnsOfRedownloads(t *testing.T) {
	dir := t.TempDir()
	writeStreamDataset(t, dir, 600, "")
	var out, errOut bytes.Buffer
	err := Run(context.Background(), []string{"stream", "file://" + dir, "--local", t.TempDir(), "--cache-limit", "20kb",
		"--shuffle", "--shuffle-block-size", "600", "--batch-size", "1", "--predownload", "1", "--json"}, &out, &errOut)
	if err != nil {
		t.Fatalf("stream: %v\n%s", err, errOut.String())
	}
	msg := errOut.String()
	if strings.Count(msg, "warning: downloaded") != 1 || !strings.Contains(msg, "the cache limit 20.0 KiB is too small") || !strings.Contains(msg, "a limit of") {
		t.Errorf("stderr %q lacks one re-download warning with the figures", msg)
	}
	// With the limit it names, the warning goes away.
	var out2, errOut2 bytes.Buffer
	err = Run(context.Background(), []string{"stream", "file://" + dir, "--local", t.TempDir(), "--cache-limit", "10mb",
		"--shuffle", "--shuffle-block-size", "600", "--batch-size", "1", "--json"}, &out2, &errOut2)
	if err != nil || strings.Contains(errOut2.String(), "warning") {
		t.Errorf("with room for the dataset: %v, stderr %q", err, errOut2.String())
	}
}

// TestStreamCLIThroughCorruptBodies: `sluice stream` against the real S3
// server through a proxy that damages a byte of 30% of the GETs' bodies
// (length and connection intact), and the index's first, streams the
// whole epoch, and every shard in its cache is the one uploaded: the
// store's checksums catch the damage and the cache downloads those shards
// again.
func TestStreamCLIThroughCorruptBodies(t *testing.T) {
	const n = 600
	_, remote, src, proxy := datasetBehindFaultProxy(t, "cli-stream-corrupt", n, "")
	m := storagetest.Rate(0.3, 5)
	proxy.Inject(
		// The index's first read too.
		storagetest.ProxyFault{Kind: storagetest.Corrupt, AfterBytes: 10, Times: 1,
			Match: func(r *http.Request) bool { return strings.Contains(r.URL.Path, "index.json") }},
		storagetest.ProxyFault{Kind: storagetest.Corrupt, AfterBytes: 1000,
			Match: func(r *http.Request) bool { return r.Method == http.MethodGet && m(r) }})
	local := t.TempDir()
	out, err := streamRunCLI(t, "stream", remote, "--local", local, "--batch-size", "4",
		"--retry-backoff", "1ms", "--retry-max-backoff", "20ms", "--json")
	if err != nil {
		t.Fatalf("stream through damaged bodies: %v\n%s", err, out)
	}
	var r struct{ Samples int64 }
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Samples != n {
		t.Fatalf("streamed %d samples, want %d (%v)", r.Samples, n, err)
	}
	if proxy.Injected(storagetest.Corrupt) == 0 {
		t.Fatal("no body damaged")
	}
	shards, _ := filepath.Glob(filepath.Join(src, "*.mds"))
	for _, s := range shards {
		want, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(local, filepath.Base(s)))
		if err != nil {
			t.Fatalf("cached shard: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("cached %s differs from the uploaded shard", filepath.Base(s))
		}
	}
	t.Logf("%d bodies damaged over %d shards", proxy.Injected(storagetest.Corrupt), len(shards))
}

// datasetBehindFaultProxy writes n samples (see writeStreamDataset) to a
// fresh prefix on the real S3 server and returns the server, the
// dataset's URL through a fault proxy in front of it, the source
// directory and the proxy (closed when the test ends).
func datasetBehindFaultProxy(t *testing.T, name string, n int, compression string) (s3test.Server, string, string, *storagetest.FaultProxy) {
	t.Helper()
	srv := s3test.Require(t)
	srv.SetCredentialEnv(t)
	prefix := s3test.NewPrefix(name)
	src := t.TempDir()
	writeStreamDataset(t, src, n, compression)
	s3test.UploadDir(t, srv.Open(t, prefix), src)
	proxy, err := storagetest.NewFaultProxy(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	return srv, srv.URL(proxy.URL, prefix), src, proxy
}
