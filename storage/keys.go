package storage

import (
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key ValidateKey accepts, in bytes (the S3 and
// GCS limit).
const MaxKeyLen = 1024

// ValidateKey checks key against the rules in the package documentation and
// returns an error matching ErrInvalidKey that names the problem.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return keyError(key, "empty key")
	case len(key) > MaxKeyLen:
		return keyError(key[:64]+"...", "longer than 1024 bytes")
	case !utf8.ValidString(key):
		return keyError(key, "not valid UTF-8")
	case strings.IndexByte(key, 0) >= 0:
		return keyError(key, "contains NUL")
	case key[0] == '/':
		return keyError(key, "starts with /")
	case key[len(key)-1] == '/':
		return keyError(key, "ends with /")
	}
	for elem := range strings.SplitSeq(key, "/") {
		switch elem {
		case "":
			return keyError(key, "empty path element")
		case ".", "..":
			return keyError(key, "contains a . or .. element")
		}
	}
	return nil
}

// JoinKey joins key elements with "/", skipping empty ones. It does not
// validate the result.
func JoinKey(elems ...string) string {
	var b strings.Builder
	for _, e := range elems {
		e = strings.Trim(e, "/")
		if e == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(e)
	}
	return b.String()
}
