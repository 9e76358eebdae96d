package storage_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/storage"
)

func TestSettleRange(t *testing.T) {
	ctx := context.Background()
	const size = 10
	stats := 0
	stat := func(context.Context) (storage.ObjectInfo, error) {
		stats++
		return storage.ObjectInfo{Size: size}, nil
	}
	for _, tc := range []struct {
		name        string
		off, length int64
		wantGET     bool // nil reader, nil error
		wantEmpty   bool
		wantErr     error
		wantStat    bool
	}{
		{"whole", 0, -1, true, false, nil, false},
		{"bounded", 3, 4, true, false, nil, false},
		{"to end", 3, -1, true, false, nil, true},
		{"empty", 3, 0, false, true, nil, true},
		{"at end", size, -1, false, true, nil, true},
		{"past end", size + 1, -1, false, false, storage.ErrPrecondition, true},
		{"past end, empty", size + 1, 0, false, false, storage.ErrPrecondition, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stats = 0
			r, err := storage.SettleRange(ctx, "test", "mem://k", tc.off, tc.length, stat)
			if (stats > 0) != tc.wantStat {
				t.Errorf("stat called %d times, want called=%v", stats, tc.wantStat)
			}
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			case tc.wantGET:
				if r != nil {
					t.Fatal("got a reader, want the driver to GET")
				}
			case tc.wantEmpty:
				b, _ := io.ReadAll(r)
				if r == nil || len(b) != 0 {
					t.Fatalf("want an empty reader, got %q", b)
				}
			}
		})
	}
	if _, err := storage.SettleRange(ctx, "test", "mem://k", -1, 1, stat); err == nil || storage.IsRetryable(err) {
		t.Fatalf("negative offset: err = %v, want a permanent error", err)
	}
}

func TestUnsatisfiableRange(t *testing.T) {
	ctx := context.Background()
	stat := func(context.Context) (storage.ObjectInfo, error) { return storage.ObjectInfo{Size: 5}, nil }
	if r, err := storage.UnsatisfiableRange(ctx, "test", "u", 5, stat); err != nil || r == nil {
		t.Fatalf("at end: %v, %v", r, err)
	}
	if _, err := storage.UnsatisfiableRange(ctx, "test", "u", 6, stat); !errors.Is(err, storage.ErrPrecondition) {
		t.Fatalf("past end: %v", err)
	}
}

func TestBodyReaderStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := storage.NewBodyReader(ctx, io.NopCloser(strings.NewReader("abcdef")), "test", "u")
	p := make([]byte, 3)
	if n, err := r.Read(p); n != 3 || err != nil {
		t.Fatalf("read: %d, %v", n, err)
	}
	cancel()
	if _, err := r.Read(p); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "test: read u") {
		t.Fatalf("after cancel: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
