package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/sluicedata/sluice/internal/stores"
	"github.com/sluicedata/sluice/plan"
	"github.com/sluicedata/sluice/stream"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/internal/s3test"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/azstore"
	"github.com/sluicedata/sluice/storage/gcsstore"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestSimulateRequestsPerStore streams a dataset cold with `sluice
// stream` from each kind of store the emulators and the standard library
// give (S3, GCS, Azure Blob, plain HTTP), counting the requests that reach
// the store, and checks that `sluice simulate` of the same URL predicts
// exactly that many: opening the dataset costs one GET of index.json where
// the response tells what a Stat would (S3, Azure, HTTP), and a Stat more
// where it does not (GCS, whose reads carry no ETag).
func TestSimulateRequestsPerStore(t *testing.T) {
	src := t.TempDir()
	writeStreamDataset(t, src, 300, "")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	shards := len(ents) - 1 // and index.json

	type store struct {
		name string
		// url returns the dataset's URL through a proxy that counts the
		// requests, set up for this test (t's environment).
		url func(t *testing.T) (string, func() int)
		// bytes, when set, returns the URL and counts the object bytes
		// the store sent too (instead of url).
		bytes func(t *testing.T) (string, func() int, func() int64)
		// closesEarly: a reader closes a body before its end (the header
		// scan of a tar), so the server may send more than is read, as
		// much as the connection took before the close.
		closesEarly bool
		// tars: a WebDataset dataset (its index is a selection or built,
		// and gets no ETag stamp).
		tars bool
	}
	stores := []store{
		{name: "s3", url: func(t *testing.T) (string, func() int) {
			srv := s3test.Require(t)
			srv.SetCredentialEnv(t)
			prefix := s3test.NewPrefix("sim-requests")
			s3test.UploadDir(t, srv.Open(t, prefix), src)
			p := countingProxy(t, srv.Endpoint)
			return srv.URL(p.URL, prefix), p.Requests
		}},
		{name: "gcs", url: func(t *testing.T) (string, func() int) {
			endpoint, bucket := os.Getenv("SLUICE_TEST_GCS_ENDPOINT"), os.Getenv("SLUICE_TEST_GCS_BUCKET")
			if endpoint == "" || bucket == "" {
				requireService(t, "GCS emulator (SLUICE_TEST_GCS_*)")
			}
			prefix := s3test.NewPrefix("sim-requests")
			t.Setenv("GCE_METADATA_HOST", "127.0.0.1:1") // no credentials from the network
			b, err := gcsstore.New(t.Context(), bucket, prefix, &gcsstore.Options{Endpoint: endpoint})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			s3test.UploadDir(t, b, src)
			// fake-gcs-server routes XML reads by the Host header: this
			// proxy sends the server's own.
			target, err := url.Parse(endpoint)
			if err != nil {
				t.Fatal(err)
			}
			var n atomic.Int64
			rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { n.Add(1); r.SetURL(target) }}
			srv := httptest.NewServer(rp)
			t.Cleanup(srv.Close)
			t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL, "http://"))
			return "gs://" + bucket + "/" + prefix, func() int { return int(n.Load()) }
		}},
		{name: "azure", url: func(t *testing.T) (string, func() int) {
			conn, container := os.Getenv("SLUICE_TEST_AZURE_CONNSTR"), os.Getenv("SLUICE_TEST_AZURE_CONTAINER")
			if conn == "" || container == "" {
				requireService(t, "Azure Blob emulator (SLUICE_TEST_AZURE_*)")
			}
			prefix := s3test.NewPrefix("sim-requests")
			t.Setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
			b, err := azstore.New(t.Context(), container, prefix, azstore.OptionsFrom(os.Getenv))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			s3test.UploadDir(t, b, src)
			endpoint := ""
			for _, kv := range strings.Split(conn, ";") {
				if v, ok := strings.CutPrefix(kv, "BlobEndpoint="); ok {
					endpoint = v
				}
			}
			u, err := url.Parse(endpoint)
			if err != nil || u.Host == "" {
				t.Fatalf("no BlobEndpoint in the connection string %q", conn)
			}
			p := countingProxy(t, u.Scheme+"://"+u.Host)
			t.Setenv("AZURE_STORAGE_CONNECTION_STRING", strings.Replace(conn, u.Scheme+"://"+u.Host, p.URL, 1))
			return "az://" + container + "/" + prefix, p.Requests
		}},
		{name: "http", bytes: func(t *testing.T) (string, func() int, func() int64) {
			return byteCountingFileServer(t, src)
		}},
		// WebDataset tars without an index: the open scans them.
		{name: "http-tars", bytes: func(t *testing.T) (string, func() int, func() int64) {
			u, n, b := byteCountingFileServer(t, writeTwoTars(t))
			return u + "/a-{0..1}.tar", n, b
		}, closesEarly: true, tars: true},
		// A directory of tars without an index: listed, then scanned.
		{name: "s3-tars-dir", url: func(t *testing.T) (string, func() int) {
			srv := s3test.Require(t)
			srv.SetCredentialEnv(t)
			prefix := s3test.NewPrefix("sim-requests-tars")
			s3test.UploadDir(t, srv.Open(t, prefix), writeTwoTars(t))
			p := countingProxy(t, srv.Endpoint)
			return srv.URL(p.URL, prefix), p.Requests
		}, tars: true},
		// With an index beside them (sluice index): a selection of it.
		{name: "http-tars-indexed", bytes: func(t *testing.T) (string, func() int, func() int64) {
			dir := writeTwoTars(t)
			if out, err := runCLI(t, "index", filepath.Join(dir, "a-{0..1}.tar")); err != nil {
				t.Fatalf("index: %v\n%s", err, out)
			}
			u, n, b := byteCountingFileServer(t, dir)
			return u + "/a-{0..1}.tar", n, b
		}, tars: true},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			var remote string
			var requests func() int
			var sent func() int64
			if s.bytes != nil {
				remote, requests, sent = s.bytes(t)
			} else {
				remote, requests = s.url(t)
			}
			out, err := runCLI(t, "simulate", remote, "--batch-size", "10", "--rank-iterator", "--json")
			if err != nil {
				t.Fatalf("simulate: %v\n%s", err, out)
			}
			var sim struct {
				Report struct {
					StoreRequests int64 `json:"store_requests"`
					StoreBytes    int64 `json:"store_bytes"`
				} `json:"report"`
			}
			if err := json.Unmarshal([]byte(out), &sim); err != nil || sim.Report.StoreRequests == 0 {
				t.Fatalf("simulate --json: %v\n%s", err, out)
			}
			before := requests() // simulate read the index
			var sentBefore int64
			if sent != nil {
				sentBefore = sent()
			}
			out, err = runCLI(t, "stream", remote, "--local", filepath.Join(t.TempDir(), "cache"), "--batch-size", "10", "--json")
			if err != nil {
				t.Fatalf("stream: %v\n%s", err, out)
			}
			got := int64(requests() - before)
			if want := sim.Report.StoreRequests; got != want {
				t.Errorf("%s: the stream made %d requests, simulate predicts %d (%d shards)", storage.RedactURL(remote), got, want, shards)
			}
			if sent != nil {
				got, want := sent()-sentBefore, sim.Report.StoreBytes
				if got != want && !(s.closesEarly && got > want) {
					t.Errorf("%s: the store sent %d object bytes, simulate predicts %d (what is read)", storage.RedactURL(remote), got, want)
				}
				if s.closesEarly {
					// What the reader read, counted under the store's
					// decorators, is what the model counts.
					if got := coldReadBytes(t, remote); got != want {
						t.Errorf("%s: a cold epoch read %d bytes from the store, simulate predicts %d", storage.RedactURL(remote), got, want)
					}
				}
			}
			// sluice stream --json counts the same requests itself.
			var rep struct {
				Store []struct {
					Op       string  `json:"op"`
					Requests int64   `json:"requests"`
					Latency  float64 `json:"latency_s"`
				} `json:"store"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("stream --json: %v\n%s", err, out)
			}
			var own int64
			for _, so := range rep.Store {
				own += so.Requests
				if so.Latency <= 0 {
					t.Errorf("stream --json: %s latency %v", so.Op, so.Latency)
				}
			}
			if own != got {
				t.Errorf("stream --json reports %d store requests (%+v), the store saw %d", own, rep.Store, got)
			}
			if !s.tars {
				checkStampLimit(t, src, remote, requests)
			}
		})
	}
}

// checkStampLimit streams remote shuffled and cold through a cache limit
// of exactly its index and 5 shards, and checks that sluice simulate
// predicts the requests the store saw. The ETag stream stores beside the
// cached index (34 bytes on S3) then leaves room for 4 shards, not 5: a
// model that counts the index alone predicts fewer downloads again.
func checkStampLimit(t *testing.T, src, remote string, requests func() int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(src, format.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := format.ParseIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	var foot int64
	for _, sh := range idx.Shards {
		foot = max(foot, sh.RawData.Bytes)
	}
	limit := fmt.Sprint(int64(len(data)) + 5*foot)
	out, err := runCLI(t, "simulate", remote, "--batch-size", "10", "--rank-iterator", "--shuffle", "--cache-limit", limit, "--json")
	if err != nil {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
	var sim struct {
		Report struct {
			StoreRequests int64 `json:"store_requests"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &sim); err != nil || sim.Report.StoreRequests == 0 {
		t.Fatalf("simulate --json: %v\n%s", err, out)
	}
	before := requests()
	if out, err := runCLI(t, "stream", remote, "--local", filepath.Join(t.TempDir(), "cache"), "--batch-size", "10",
		"--shuffle", "--cache-limit", limit, "--json"); err != nil {
		t.Fatalf("stream: %v\n%s", err, out)
	}
	if got := int64(requests() - before); got != sim.Report.StoreRequests {
		t.Errorf("%s through a cache limit of %s bytes (the index and 5 shards): the stream made %d requests, simulate predicts %d",
			storage.RedactURL(remote), limit, got, sim.Report.StoreRequests)
	}
}

// coldReadBytes reads one epoch of remote through a fresh cache with
// stream.Open and returns the bytes it read from the store.
func coldReadBytes(t *testing.T, remote string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var counted []*countingBucket
	var mu sync.Mutex
	ds, err := stream.Open(ctx, &stream.Options{Remote: remote, Local: filepath.Join(t.TempDir(), "cache"), BatchSize: 10,
		Registry: stores.Default(), StoreInner: func(b storage.Bucket) storage.Bucket {
			cb := &countingBucket{Bucket: b}
			mu.Lock()
			counted = append(counted, cb)
			mu.Unlock()
			return cb
		}})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := ds.NewEpoch(ctx, plan.World{Nodes: 1, RanksPerNode: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ep.RankIter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	it.Close()
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var n int64
	for _, cb := range counted {
		n += cb.read.Load()
	}
	return n
}

// writeTwoTars writes two WebDataset tars, a-0.tar and a-1.tar, into a
// new directory and returns it.
func writeTwoTars(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for i, name := range []string{"gnu.tar", "pax.tar"} {
		b, err := os.ReadFile(filepath.Join("../../format/wds/testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "a-"+string(rune('0'+i))+".tar"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// countingFileServer serves dir over HTTP at the URL it returns,
// counting the requests.
func countingFileServer(t *testing.T, dir string) (string, func() int) {
	t.Helper()
	u, n, _ := byteCountingFileServer(t, dir)
	return u, n
}

// byteCountingFileServer is countingFileServer that also counts the
// object bytes it sends.
func byteCountingFileServer(t *testing.T, dir string) (string, func() int, func() int64) {
	t.Helper()
	var n, sent atomic.Int64
	files := http.StripPrefix("/data", http.FileServer(http.Dir(dir)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		files.ServeHTTP(&countingWriter{ResponseWriter: w, n: &sent}, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/data", func() int { return int(n.Load()) }, sent.Load
}

// countingWriter counts into n the body bytes of a successful response
// written through it (an object's bytes, not an error page's).
type countingWriter struct {
	http.ResponseWriter
	n      *atomic.Int64
	failed bool
}

func (w *countingWriter) WriteHeader(code int) {
	w.failed = code >= 300
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(p []byte) (int, error) {
	k, err := w.ResponseWriter.Write(p)
	if !w.failed {
		w.n.Add(int64(k))
	}
	return k, err
}

// countingProxy returns a proxy to target that counts the requests it
// passes on (storagetest.FaultProxy with no faults).
func countingProxy(t *testing.T, target string) *storagetest.FaultProxy {
	t.Helper()
	p, err := storagetest.NewFaultProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// requireService skips t, or fails it under SLUICE_REQUIRE_SERVICES=1,
// for a missing emulator.
func requireService(t *testing.T, what string) {
	t.Helper()
	why := "no " + what + ": run under .ci/with-services.sh"
	if os.Getenv("SLUICE_REQUIRE_SERVICES") == "1" {
		t.Fatal(why + " (required: SLUICE_REQUIRE_SERVICES=1)")
	}
	t.Skip(why)
}
