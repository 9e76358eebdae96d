package storage_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/memstore"
)

func TestRegistry(t *testing.T) {
	var r storage.Registry
	var got *url.URL
	r.Register("MEM", func(_ context.Context, u *url.URL) (storage.Bucket, error) {
		got = u
		return memstore.New(u.Host), nil
	})
	b, err := r.Open(context.Background(), "mem://bucket/prefix")
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if got.Scheme != "mem" || got.Host != "bucket" || got.Path != "/prefix" {
		t.Errorf("opener got %v", got)
	}
	if _, err := r.Open(context.Background(), "gopher://x"); err == nil || !strings.Contains(err.Error(), "supported: mem") {
		t.Errorf("unknown scheme: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a scheme twice did not panic")
		}
	}()
	r.Register("mem", nil)
}

func TestParseURL(t *testing.T) {
	u, err := storage.ParseURL("./local/dir")
	if err != nil || u.Scheme != "file" || u.Path != "./local/dir" {
		t.Errorf("ParseURL(plain path) = %v, %v", u, err)
	}
	u, err = storage.ParseURL("S3://b/p")
	if err != nil || u.Scheme != "s3" {
		t.Errorf("ParseURL(S3://) = %v, %v", u, err)
	}
	if _, err := storage.ParseURL("s3://b/%zz"); err == nil {
		t.Error("bad escape accepted")
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"s3://b/p":                        "s3://b/p",
		"/local/path":                     "/local/path",
		"http://user:hunter2@host:9000/x": "http://user:xxxxx@host:9000/x",
		"s3://b/p?endpoint=http%3A%2F%2Fu%3Ahunter2%40h":   "s3://b/p?endpoint=http%3A%2F%2Fu%3Axxxxx%40h",
		"https://acct.blob/c?sv=1&sig=hunter2":             "https://acct.blob/c?sig=xxxxx&sv=1",
		"https://h/o?X-Amz-Signature=hunter2&X-Amz-Date=1": "https://h/o?X-Amz-Date=1&X-Amz-Signature=xxxxx",
		"http://user:hunter2@host/%zz":                     "http://user:xxxxx@host/%zz",
	} {
		if got := storage.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	r := &storage.Registry{}
	_, err := r.Open(context.Background(), "nope://user:hunter2@host/x")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Open error %v shows the password", err)
	}
}
