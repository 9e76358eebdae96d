package stream

import (
	"errors"
	"slices"
	"testing"
)

func TestExpandTarURLs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"s3://b/x-{000..002}.tar", []string{"s3://b/x-000.tar", "s3://b/x-001.tar", "s3://b/x-002.tar"}},
		{"a-{8..11}.tar", []string{"a-8.tar", "a-9.tar", "a-10.tar", "a-11.tar"}},
		{"a-{0..6..3}.tar", []string{"a-0.tar", "a-3.tar", "a-6.tar"}},
		{"a-{2..0}.tar", []string{"a-2.tar", "a-1.tar", "a-0.tar"}},
		{"{a,b}/{x,y{1..2}}.tar", []string{"a/x.tar", "a/y1.tar", "a/y2.tar", "b/x.tar", "b/y1.tar", "b/y2.tar"}},
		{"p{a..c}.tar", []string{"pa.tar", "pb.tar", "pc.tar"}},
		{"one.tar :: two-{0..1}.tar::", []string{"one.tar", "two-0.tar", "two-1.tar"}},
		{"lit{x}.tar", []string{"lit{x}.tar"}},
	} {
		got, err := ExpandTarURLs(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ExpandTarURLs(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"a{0..1.tar", "a}.tar", "::", "x-{0..99999999}.tar", "x-{0..5..0}.tar"} {
		if _, err := ExpandTarURLs(bad); !errors.Is(err, ErrBadTarSpec) {
			t.Errorf("ExpandTarURLs(%q): %v, want ErrBadTarSpec", bad, err)
		}
	}
}

func TestParseTarSpecRoot(t *testing.T) {
	for _, c := range []struct {
		in, root string
		keys     []string
	}{
		{"s3://b/d/s-{0..1}.tar", "s3://b/d", []string{"s-0.tar", "s-1.tar"}},
		{"s3://b/d/a/x.tar::s3://b/d/b/y.tar", "s3://b/d", []string{"a/x.tar", "b/y.tar"}},
		{"s3://b/x.tar", "s3://b", []string{"x.tar"}},
		{"/data/w/s-{0..1}.tar", "/data/w", []string{"s-0.tar", "s-1.tar"}},
		{"/x.tar", "/", []string{"x.tar"}},
		// Store options in the query go to the root, not the keys.
		{"s3://b/d/s-{0..1}.tar?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=r", "s3://b/d?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=r", []string{"s-0.tar", "s-1.tar"}},
		{"s3://b/x.tar?region=r", "s3://b?region=r", []string{"x.tar"}},
	} {
		s, err := parseTarSpec(c.in)
		if err != nil || s == nil || s.root != c.root || !slices.Equal(s.keys, c.keys) {
			t.Errorf("parseTarSpec(%q) = %+v, %v; want %q %q", c.in, s, err, c.root, c.keys)
		}
	}
	for _, notTar := range []string{"s3://b/dataset", "/data/mds"} {
		if s, err := parseTarSpec(notTar); s != nil || err != nil {
			t.Errorf("parseTarSpec(%q) = %+v, %v; want nil", notTar, s, err)
		}
	}
	if _, err := parseTarSpec("s3://a/x.tar::s3://b/y.tar"); !errors.Is(err, ErrBadTarSpec) {
		t.Errorf("two buckets: %v", err)
	}
	if _, err := parseTarSpec("s3://b/x.tar?region=a::s3://b/y.tar?region=b"); !errors.Is(err, ErrBadTarSpec) {
		t.Errorf("two sets of store options: %v", err)
	}
	if _, err := parseTarSpec("s3://b/x.tar?region=a::s3://b/y.tar"); !errors.Is(err, ErrBadTarSpec) {
		t.Errorf("store options on one URL only: %v", err)
	}
	if _, err := parseTarSpec("s3://b/{x.tar,y.txt}"); !errors.Is(err, ErrBadTarSpec) {
		t.Errorf("non-tar in list: %v", err)
	}
}

func FuzzExpandTarURLs(f *testing.F) {
	for _, s := range []string{"s3://b/x-{000..002}.tar", "{a,b}/{x,y{1..2}}.tar::c.tar", "{{{", "a{0..3..2}b{c,d}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// A small limit keeps each run quick; the limit logic is the same.
		const limit = 4096
		urls, err := expandTarURLs(s, limit)
		if err == nil && (len(urls) == 0 || len(urls) > limit) {
			t.Fatalf("%q: %d urls", s, len(urls))
		}
		if err != nil && !errors.Is(err, ErrBadTarSpec) {
			t.Fatalf("%q: error %v does not match ErrBadTarSpec", s, err)
		}
	})
}
