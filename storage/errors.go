package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HTTPError is the error a driver returns for a response with a non-success
// HTTP status. Drivers built on an SDK wrap the SDK's error in it (Err), so
// errors.As still reaches the native type, and fill StatusCode and
// RetryAfter from the response.
//
// An HTTPError matches the sentinels by status: 404 and 410 match
// ErrNotExist, 401 and 403 match ErrPermission, 412 and 416 match
// ErrPrecondition. Drivers therefore need not wrap the sentinel as well.
type HTTPError struct {
	// Op is the operation ("stat", "get", "put", "list", "delete").
	Op string
	// URL names the object or listing, as Bucket.URL returns it.
	URL string
	// StatusCode is the HTTP status code of the response.
	StatusCode int
	// Code is the store's own error code when it sent one ("SlowDown",
	// "NoSuchKey", "ServerBusy"); empty otherwise.
	Code string
	// RetryAfter is the delay the server asked for with a Retry-After
	// header (or the store's equivalent); zero when it asked for none.
	RetryAfter time.Duration
	// Err is the underlying (SDK) error; it may be nil.
	Err error
}

// Error implements error.
func (e *HTTPError) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	b.WriteString(" ")
	b.WriteString(e.URL)
	b.WriteString(": HTTP ")
	b.WriteString(strconv.Itoa(e.StatusCode))
	if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteString(" ")
		b.WriteString(t)
	}
	if e.Code != "" {
		b.WriteString(" (")
		b.WriteString(e.Code)
		b.WriteString(")")
	}
	if hint := statusHint(e.StatusCode); hint != "" {
		b.WriteString(": ")
		b.WriteString(hint)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// statusHint says what a person can do about a status.
func statusHint(code int) string {
	switch code {
	case http.StatusUnauthorized:
		return "the store did not accept the credentials; check that they are set and not expired"
	case http.StatusForbidden:
		return "access denied; check that the credentials in use may read/write this object"
	case http.StatusNotFound, http.StatusGone:
		return "no such object"
	}
	return ""
}

// Unwrap returns the underlying error.
func (e *HTTPError) Unwrap() error { return e.Err }

// Is reports whether the status maps to target (see the type's doc).
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrNotExist:
		return e.StatusCode == http.StatusNotFound || e.StatusCode == http.StatusGone
	case ErrPermission:
		return e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden
	case ErrPrecondition:
		return e.StatusCode == http.StatusPreconditionFailed ||
			e.StatusCode == http.StatusRequestedRangeNotSatisfiable
	}
	return false
}

// HTTPStatusCode returns StatusCode; it makes HTTPError satisfy the
// interface HTTPStatus looks for.
func (e *HTTPError) HTTPStatusCode() int { return e.StatusCode }

// RetryAfterDelay returns RetryAfter; it makes HTTPError satisfy the
// interface RetryAfter looks for.
func (e *HTTPError) RetryAfterDelay() time.Duration { return e.RetryAfter }

// HTTPStatus returns the HTTP status code carried by err or anything it
// wraps, or 0 when there is none. It finds any error with a method
// HTTPStatusCode() int — HTTPError, and the AWS SDK's (smithy-go) response
// errors, among others.
func HTTPStatus(err error) int {
	var sc interface{ HTTPStatusCode() int }
	if errors.As(err, &sc) {
		return sc.HTTPStatusCode()
	}
	return 0
}

// RetryAfter returns the delay the server asked for before the next
// attempt, found through a method RetryAfterDelay() time.Duration on err or
// anything it wraps, or 0 when none was given.
func RetryAfter(err error) time.Duration {
	var ra interface{ RetryAfterDelay() time.Duration }
	if errors.As(err, &ra) {
		if d := ra.RetryAfterDelay(); d > 0 {
			return d
		}
	}
	return 0
}

// ParseRetryAfter parses the value of a Retry-After header: either a number
// of seconds or an HTTP date (relative to now). It returns 0 for an empty,
// malformed or past value.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		const maxSecs = int64(24 * time.Hour / time.Second)
		return time.Duration(min(secs, maxSecs)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// permanentError marks an error as not worth retrying.
type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Permanent() bool { return true }

// Permanent wraps err so that IsRetryable reports false for it, for failures
// a driver knows will not go away (a malformed request, a bad
// configuration). It returns nil for nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// temporaryError marks an error as worth retrying.
type temporaryError struct{ err error }

func (e *temporaryError) Error() string   { return e.err.Error() }
func (e *temporaryError) Unwrap() error   { return e.err }
func (e *temporaryError) Temporary() bool { return true }

// Temporary wraps err so that IsRetryable reports true for it (unless it
// also matches a permanent sentinel), for failures a driver knows are
// transient but that carry no HTTP status. It returns nil for nil.
func Temporary(err error) error {
	if err == nil {
		return nil
	}
	return &temporaryError{err}
}

// IsRetryable reports whether an operation that failed with err may succeed
// when tried again. It is the one classification every decorator and
// helper uses; drivers make their errors classifiable as described in the
// package documentation ("Retryable and permanent errors").
//
// A context error (context.Canceled, context.DeadlineExceeded, also when an
// HTTP client's own timeout wraps it) counts as the caller giving up. A
// caller whose context is still live knows better — the error came from an
// inner timeout — and may retry it; the retry decorator does.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	// Outcomes that another attempt cannot change.
	if errors.Is(err, ErrNotExist) || errors.Is(err, ErrPermission) ||
		errors.Is(err, ErrPrecondition) || errors.Is(err, ErrClosed) ||
		errors.Is(err, ErrReadOnly) || errors.Is(err, ErrInvalidKey) ||
		errors.Is(err, errors.ErrUnsupported) {
		return false
	}
	var perm interface{ Permanent() bool }
	if errors.As(err, &perm) && perm.Permanent() {
		return false
	}
	if code := HTTPStatus(err); code != 0 {
		return retryableStatus(code)
	}
	// The caller's context: its owner gave up (a retry decorator tells an
	// attempt timeout of its own apart before asking). Checked before
	// Temporary, which context.DeadlineExceeded also reports.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var tmp interface{ Temporary() bool }
	if errors.As(err, &tmp) && tmp.Temporary() {
		return true
	}
	var to interface{ Timeout() bool }
	if errors.As(err, &to) && to.Timeout() {
		return true
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		// A local system error that is none of the above (ENOSPC, EISDIR,
		// EROFS...) will not heal by itself.
		return errno.Temporary() || errno.Timeout()
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTemporary || dnsErr.IsTimeout
	}
	// Unknown: most likely a transport failure an SDK did not classify.
	// Retrying it costs at most the retry budget.
	return true
}

// retryableStatus reports whether a request that got HTTP status code may
// succeed when repeated.
func retryableStatus(code int) bool {
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return true
	case code == http.StatusNotImplemented, code == http.StatusHTTPVersionNotSupported:
		return false
	case code >= 500:
		return true
	}
	return false
}

// IsThrottled reports whether err says the store asked the client to slow
// down (HTTP 429, or 503 such as S3's SlowDown). Retry policies back off
// longer on it.
func IsThrottled(err error) bool {
	code := HTTPStatus(err)
	return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
}

// keyError reports an invalid key.
func keyError(key, reason string) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, reason)
}
