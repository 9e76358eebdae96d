package storage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedata/sluice/storage"
)

// sdkError mimics an SDK response error (smithy-go has HTTPStatusCode()).
type sdkError struct{ code int }

func (e sdkError) Error() string       { return fmt.Sprintf("sdk: status %d", e.code) }
func (e sdkError) HTTPStatusCode() int { return e.code }

type timeoutError struct{}

func (timeoutError) Error() string { return "i/o timeout" }
func (timeoutError) Timeout() bool { return true }

func TestIsRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"not exist", fmt.Errorf("get: %w", storage.ErrNotExist), false},
		{"os not exist", &fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, false},
		{"permission", storage.ErrPermission, false},
		{"precondition", storage.ErrPrecondition, false},
		{"closed", storage.ErrClosed, false},
		{"read-only", storage.ErrReadOnly, false},
		{"invalid key", storage.ErrInvalidKey, false},
		{"unsupported", errors.ErrUnsupported, false},
		{"canceled", context.Canceled, false},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{"url error wrapping canceled", &url.Error{Op: "Get", URL: "u", Err: context.Canceled}, false},
		{"permanent", storage.Permanent(errors.New("x")), false},
		{"temporary", storage.Temporary(errors.New("x")), true},
		{"temporary not-exist stays permanent", storage.Temporary(storage.ErrNotExist), false},
		{"HTTP 400", &storage.HTTPError{StatusCode: 400}, false},
		{"HTTP 401", &storage.HTTPError{StatusCode: 401}, false},
		{"HTTP 403", &storage.HTTPError{StatusCode: 403}, false},
		{"HTTP 404", &storage.HTTPError{StatusCode: 404}, false},
		{"HTTP 408", &storage.HTTPError{StatusCode: 408}, true},
		{"HTTP 412", &storage.HTTPError{StatusCode: 412}, false},
		{"HTTP 429", &storage.HTTPError{StatusCode: 429}, true},
		{"HTTP 500", &storage.HTTPError{StatusCode: 500}, true},
		{"HTTP 501", &storage.HTTPError{StatusCode: 501}, false},
		{"HTTP 502", &storage.HTTPError{StatusCode: 502}, true},
		{"HTTP 503", &storage.HTTPError{StatusCode: 503}, true},
		{"HTTP 504", &storage.HTTPError{StatusCode: 504}, true},
		{"SDK 503", fmt.Errorf("op: %w", sdkError{503}), true},
		{"SDK 404", sdkError{404}, false},
		{"connection reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"broken pipe", syscall.EPIPE, true},
		{"unexpected EOF", fmt.Errorf("body: %w", io.ErrUnexpectedEOF), true},
		{"EOF before response", &url.Error{Op: "Get", URL: "u", Err: io.EOF}, true},
		{"timeout", timeoutError{}, true},
		{"net op error", &net.OpError{Op: "dial", Err: errors.New("no route")}, true},
		{"no space", &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, false},
		{"is a directory", &fs.PathError{Op: "read", Path: "x", Err: syscall.EISDIR}, false},
		{"EAGAIN", syscall.EAGAIN, true},
		{"unknown", errors.New("something odd"), true},
	}
	for _, tt := range tests {
		if got := storage.IsRetryable(tt.err); got != tt.want {
			t.Errorf("%s: IsRetryable(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestHTTPErrorMatchesSentinels(t *testing.T) {
	tests := []struct {
		code int
		want error
	}{
		{404, storage.ErrNotExist}, {410, storage.ErrNotExist},
		{401, storage.ErrPermission}, {403, storage.ErrPermission},
		{412, storage.ErrPrecondition}, {416, storage.ErrPrecondition},
	}
	sentinels := []error{storage.ErrNotExist, storage.ErrPermission, storage.ErrPrecondition}
	for _, tt := range tests {
		cause := errors.New("sdk error")
		err := fmt.Errorf("driver: %w", &storage.HTTPError{Op: "get", URL: "s3://b/k", StatusCode: tt.code, Err: cause})
		for _, s := range sentinels {
			if got := errors.Is(err, s); got != (s == tt.want) {
				t.Errorf("HTTP %d: errors.Is(%v) = %v", tt.code, s, got)
			}
		}
		if !errors.Is(err, cause) {
			t.Errorf("HTTP %d: cause not reachable", tt.code)
		}
		if storage.HTTPStatus(err) != tt.code {
			t.Errorf("HTTPStatus = %d, want %d", storage.HTTPStatus(err), tt.code)
		}
	}
	if storage.HTTPStatus(errors.New("x")) != 0 || storage.RetryAfter(errors.New("x")) != 0 {
		t.Error("plain errors carry a status or delay")
	}
}

func TestHTTPErrorMessage(t *testing.T) {
	err := &storage.HTTPError{Op: "get", URL: "s3://b/k", StatusCode: 403, Code: "AccessDenied", Err: errors.New("sdk said no")}
	want := "get s3://b/k: HTTP 403 Forbidden (AccessDenied): access denied; check that the credentials in use may read/write this object: sdk said no"
	if got := err.Error(); got != want {
		t.Errorf("message\n got %q\nwant %q", got, want)
	}
}

func TestIsThrottled(t *testing.T) {
	for code, want := range map[int]bool{429: true, 503: true, 500: false, 404: false} {
		if got := storage.IsThrottled(&storage.HTTPError{StatusCode: code}); got != want {
			t.Errorf("IsThrottled(%d) = %v", code, got)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"7", 7 * time.Second},
		{" 12 ", 12 * time.Second},
		{"99999999999", 24 * time.Hour},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"soon", 0},
	}
	for _, tt := range tests {
		if got := storage.ParseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "Wed, 21 Oct 2015 07:28:00 GMT", "-1", "1e9", ""} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if d := storage.ParseRetryAfter(s, now); d < 0 {
			t.Errorf("ParseRetryAfter(%q) = %v < 0", s, d)
		}
	})
}

func TestValidateKey(t *testing.T) {
	good := []string{"a", "a/b", "shard.00000.mds", "x y/z", "日本/語", ".hidden", "a..b", "..a", "a/...", "plus+%20"}
	for _, k := range good {
		if err := storage.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v", k, err)
		}
	}
	long := make([]byte, storage.MaxKeyLen+1)
	for i := range long {
		long[i] = 'a'
	}
	bad := []string{"", "/a", "a/", "a//b", ".", "..", "./a", "a/.", "a/../b", "\xff", "a\x00b", string(long)}
	for _, k := range bad {
		if err := storage.ValidateKey(k); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
}

func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "a//b", "\xff", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if storage.ValidateKey(k) != nil {
			return
		}
		// A valid key joined below a root never leaves it.
		if j := storage.JoinKey("root", k); len(j) <= len("root/") || j[:5] != "root/" {
			t.Errorf("JoinKey(root, %q) = %q", k, j)
		}
		for _, e := range splitKey(k) {
			if e == "" || e == "." || e == ".." {
				t.Errorf("ValidateKey accepted %q with element %q", k, e)
			}
		}
	})
}

func splitKey(k string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(k); i++ {
		if i == len(k) || k[i] == '/' {
			out = append(out, k[start:i])
			start = i + 1
		}
	}
	return out
}

func TestJoinKey(t *testing.T) {
	if got := storage.JoinKey("a/", "", "/b/", "c"); got != "a/b/c" {
		t.Errorf("JoinKey = %q", got)
	}
}
