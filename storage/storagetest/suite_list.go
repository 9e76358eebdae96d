package storagetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicedata/sluice/storage"
)

func (s *suite) testList(t *testing.T) {
	s.listing(t)
	b, w := s.newBucket(t)
	// "a/b" sorts after "a-b" and "a.b" ('-' and '.' are below '/') and
	// before "a0": a store that walks directories naively gets this wrong.
	// (No key is also the parent of another, which file systems forbid.)
	keys := []string{"a-b", "a.b", "a/b", "a/c/d", "a/c0", "a0", "ab", "b/x/y", "b/x/z", "c"}
	if s.opts.NoKeyUnderKey {
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == "a" })
	}
	for i, k := range slices.Backward(keys) {
		Put(t, w, k, Pattern(uint64(i), i))
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", keys},
		{"a", []string{"a-b", "a.b", "a/b", "a/c/d", "a/c0", "a0", "ab"}},
		{"a/", []string{"a/b", "a/c/d", "a/c0"}},
		{"a/c", []string{"a/c/d", "a/c0"}},
		{"a/c/", []string{"a/c/d"}},
		{"a-", []string{"a-b"}},
		{"b/x", []string{"b/x/y", "b/x/z"}},
		{"b/x/y", []string{"b/x/y"}},
		{"zz", []string{}},
		{"a/b/", []string{}},
	}
	for _, tt := range tests {
		if s.opts.NoKeyUnderKey {
			tt.want = slices.DeleteFunc(slices.Clone(tt.want), func(k string) bool { return k == "a" })
		}
		if diff := cmp.Diff(tt.want, ListKeys(t, b, tt.prefix)); diff != "" {
			t.Errorf("List(%q) mismatch (-want +got):\n%s", tt.prefix, diff)
		}
	}
	sizes := map[string]int64{}
	err := b.List(t.Context(), "", func(info storage.ObjectInfo) error {
		sizes[info.Key] = info.Size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range slices.Backward(keys) {
		if sizes[k] != int64(i) {
			t.Errorf("List reports size %d for %q, want %d", sizes[k], k, i)
		}
	}
}

func (s *suite) testListStops(t *testing.T) {
	if s.opts.NoList {
		b, _ := s.newBucket(t)
		err := b.List(t.Context(), "", func(storage.ObjectInfo) error { return nil })
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("List on a bucket that cannot list = %v, want errors.ErrUnsupported", err)
		}
		return
	}
	b, w := s.newBucket(t)
	for i := range 5 {
		Put(t, w, fmt.Sprintf("k%d", i), []byte("x"))
	}
	stop := errors.New("stop here")
	calls := 0
	err := b.List(t.Context(), "", func(storage.ObjectInfo) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Errorf("List returned %v after %d calls; want the callback's error after 2", err, calls)
	}
}

func (s *suite) testListPagination(t *testing.T) {
	s.listing(t)
	b, w := s.newBucket(t)
	n := s.opts.ManyObjects
	want := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		want[i] = fmt.Sprintf("many/%05d", i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			Put(t, w, want[i], []byte{byte(i)})
		}()
	}
	wg.Wait()
	Put(t, w, "other", []byte("x"))
	if diff := cmp.Diff(want, ListKeys(t, b, "many/")); diff != "" {
		t.Errorf("List(many/) mismatch (-want +got):\n%s", diff)
	}
	if got := len(ListKeys(t, b, "")); got != n+1 {
		t.Errorf("List() = %d objects, want %d", got, n+1)
	}
}
