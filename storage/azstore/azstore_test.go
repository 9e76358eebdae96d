package azstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/azstore"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// server describes the Azure Blob emulator the tests use (Azurite in CI,
// started by .ci/services.sh).
type server struct{ connStr, container string }

// testServer returns the server from SLUICE_TEST_AZURE_*, or skips the test
// when it is not configured (fails instead under SLUICE_REQUIRE_SERVICES=1).
func testServer(t testing.TB) server {
	t.Helper()
	s := server{connStr: os.Getenv("SLUICE_TEST_AZURE_CONNSTR"), container: os.Getenv("SLUICE_TEST_AZURE_CONTAINER")}
	if s.connStr == "" || s.container == "" {
		const why = "no Azure Blob emulator: set SLUICE_TEST_AZURE_CONNSTR and SLUICE_TEST_AZURE_CONTAINER (or run under .ci/with-services.sh)"
		if os.Getenv("SLUICE_REQUIRE_SERVICES") == "1" {
			t.Fatal(why + " — required because SLUICE_REQUIRE_SERVICES=1")
		}
		t.Skip(why)
	}
	return s
}

// connField returns one field of a connection string.
func connField(connStr, name string) string {
	for f := range strings.SplitSeq(connStr, ";") {
		if k, v, ok := strings.Cut(f, "="); ok && k == name {
			return v
		}
	}
	return ""
}

func uniquePrefix(t testing.TB) string {
	var r [6]byte
	rand.Read(r[:])
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return "test/" + name + "-" + hex.EncodeToString(r[:])
}

func newBucket(t testing.TB, s server) *azstore.Bucket {
	t.Helper()
	prefix := uniquePrefix(t)
	// Small pages, so that listing tests cross page boundaries.
	opts := &azstore.Options{ConnectionString: s.connStr, ListPageSize: 7}
	b, err := azstore.New(context.Background(), s.container, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := azstore.New(context.Background(), s.container, prefix, opts)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer c.Close()
		ctx := context.Background()
		var keys []string
		if err := c.List(ctx, "", func(o storage.ObjectInfo) error {
			keys = append(keys, o.Key)
			return nil
		}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, k := range keys {
			if err := c.Delete(ctx, k); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		b.Close()
	})
	return b
}

func TestConformance(t *testing.T) {
	s := testServer(t)
	storagetest.Run(t, func(t *testing.T) storage.Bucket { return newBucket(t, s) })
}

// clearAzureEnv unsets every variable OptionsFromEnv reads.
func clearAzureEnv(t *testing.T) {
	for _, n := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_ACCOUNT_NAME",
		"AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_ACCOUNT_ACCESS_KEY", "AZURE_STORAGE_SAS_TOKEN",
		"AZURE_STORAGE_BLOB_ENDPOINT"} {
		t.Setenv(n, "")
	}
}

// TestOpenFromEnvironment opens az:// and azure:// URLs with each way of
// naming the account that needs no network login: a connection string, an
// account name and key (MosaicML's variables), and an account with a SAS
// token, the last two with a custom endpoint.
func TestOpenFromEnvironment(t *testing.T) {
	s := testServer(t)
	// A container SAS, signed with the emulator's account key.
	kb, err := azstore.New(t.Context(), s.container, "", &azstore.Options{ConnectionString: s.connStr})
	if err != nil {
		t.Fatal(err)
	}
	sasURL, err := kb.Container().GetSASURL(sas.ContainerPermissions{Read: true, Create: true, Write: true, Delete: true, List: true},
		time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	su, err := url.Parse(sasURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, scheme string
		env          map[string]string
	}{
		{"connection string", "az", map[string]string{"AZURE_STORAGE_CONNECTION_STRING": s.connStr}},
		{"account and key", "azure", map[string]string{
			"AZURE_ACCOUNT_NAME":          connField(s.connStr, "AccountName"),
			"AZURE_ACCOUNT_ACCESS_KEY":    connField(s.connStr, "AccountKey"),
			"AZURE_STORAGE_BLOB_ENDPOINT": connField(s.connStr, "BlobEndpoint"),
		}},
		{"account and SAS", "az", map[string]string{
			"AZURE_STORAGE_ACCOUNT":       connField(s.connStr, "AccountName"),
			"AZURE_STORAGE_SAS_TOKEN":     "?" + su.RawQuery,
			"AZURE_STORAGE_BLOB_ENDPOINT": connField(s.connStr, "BlobEndpoint"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearAzureEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			prefix := uniquePrefix(t)
			u, err := url.Parse(tc.scheme + "://" + s.container + "/" + prefix)
			if err != nil {
				t.Fatal(err)
			}
			b, err := azstore.Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			data := storagetest.Pattern(5, 3000)
			storagetest.Put(t, b, "k/v.bin", data)
			defer b.Delete(context.Background(), "k/v.bin")
			if got := storagetest.Get(t, b, "k/v.bin"); !bytes.Equal(got, data) {
				t.Errorf("read back %d bytes, want the %d written", len(got), len(data))
			}
			if got, want := b.URL("k/v.bin"), tc.scheme+"://"+s.container+"/"+prefix+"/k/v.bin"; got != want {
				t.Errorf("URL = %q, want %q", got, want)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	clearAzureEnv(t)
	for _, tc := range []struct{ url, wantErr string }{
		{"az:///prefix", "no container name"},
		{"az://c/p?x=1", "take no options"},
		{"az://c/p", "no storage account"},
		{"s3://c/p", "scheme is not az"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			_, err = azstore.Open(t.Context(), u)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Open(%s) = %v, want an error containing %q", tc.url, err, tc.wantErr)
			}
		})
	}
}

func TestPermissionDenied(t *testing.T) {
	s := testServer(t)
	// The right account with a wrong (but well-formed) key.
	wrong := strings.Replace(s.connStr, connField(s.connStr, "AccountKey"), "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXk=", 1)
	b, err := azstore.New(t.Context(), s.container, uniquePrefix(t), &azstore.Options{ConnectionString: wrong})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.NewRangeReader(t.Context(), "x", 0, -1)
	if !errors.Is(err, storage.ErrPermission) {
		t.Fatalf("get with a wrong key = %v, want ErrPermission", err)
	}
	if storage.IsRetryable(err) {
		t.Errorf("IsRetryable(%v) = true", err)
	}
	if !strings.Contains(err.Error(), "connection string") || !strings.Contains(err.Error(), s.container) {
		t.Errorf("error %q does not name the credential source and container", err)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Errorf("errors.As(%v, *azcore.ResponseError) = false, want the SDK error kept", err)
	}
}

func TestMissing(t *testing.T) {
	s := testServer(t)
	b := newBucket(t, s)
	if _, err := b.Stat(t.Context(), "nope"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("Stat of a missing blob = %v, want ErrNotExist", err)
	}
	nb, err := azstore.New(t.Context(), "sluice-no-such-container", "", &azstore.Options{ConnectionString: s.connStr})
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	err = nb.List(t.Context(), "", func(storage.ObjectInfo) error { return nil })
	if !errors.Is(err, storage.ErrNotExist) || !strings.Contains(err.Error(), `container "sluice-no-such-container" does not exist`) {
		t.Errorf("list of a missing container = %v, want ErrNotExist naming it", err)
	}
}

// TestBlockUpload writes a blob larger than the block size, so it goes up
// as several staged blocks.
func TestBlockUpload(t *testing.T) {
	s := testServer(t)
	b := newBucket(t, s)
	data := storagetest.Pattern(11, 3<<20+5)
	w, err := b.NewWriter(t.Context(), "big", &storage.WriteOptions{PartSize: 1 << 20, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := storagetest.Get(t, b, "big"); !bytes.Equal(got, data) {
		t.Errorf("read back %d bytes, want the %d written", len(got), len(data))
	}
}

// BenchmarkBucket runs the shared storage benchmarks on the emulator.
func BenchmarkBucket(b *testing.B) {
	s := testServer(b)
	storagetest.RunBenchmarks(b, newBucket(b, s))
}
