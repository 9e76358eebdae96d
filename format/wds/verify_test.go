package wds_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/wds"
)

// shardEntry is the index entry of the tar dir/name under one header
// digest key.
func shardEntry(t *testing.T, dir, name, key, digest string) *format.ShardInfo {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := wds.Scan(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &format.ShardInfo{Format: wds.Format, Version: 2, Samples: s.Samples,
		RawData: format.FileInfo{Basename: name, Bytes: int64(len(b)), Hashes: map[string]string{key: digest}}}
}

// TestHeaderDigests pins the header digest of the test archives under the
// key index builds write (XXH3-128) and under the SHA-256 key of indexes
// written before it: VerifyShard accepts both, so an index built by an
// older sluice still verifies.
func TestHeaderDigests(t *testing.T) {
	for _, c := range []struct{ file, xxh3, sha256 string }{
		// The sha256 values are what the previous index build wrote for
		// these files (wds_headers_sha256).
		{"gnu.tar", "45fe03257bda8bcf3c6854eaff27d217", "f0dc6ed5476d4ca62daaf5dd71670fa6d155a3a4904627fcb501636b465916be"},
		{"pax.tar", "b40dea4c751995577b03597b7d7105f8", "089521379d80119a306388c46667d591fbe0f35cb0bf9e388f419cb683cd7f4b"},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		s, err := wds.Scan(bytes.NewReader(b), nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Digest != c.xxh3 {
			t.Errorf("%s: Scan digest %s, want %s", c.file, s.Digest, c.xxh3)
		}
		for key, digest := range map[string]string{wds.HeaderDigest: c.xxh3, wds.HeaderDigestSHA256: c.sha256} {
			if _, _, err := wds.VerifyShard("testdata", 0, shardEntry(t, "testdata", c.file, key, digest)); err != nil {
				t.Errorf("%s: verify under %s: %v", c.file, key, err)
			}
		}
	}
}

// TestVerifyShardDigestMismatch: a member renamed (same sizes, same sample
// count) fails verification under either header digest key, naming the
// digest.
func TestVerifyShardDigestMismatch(t *testing.T) {
	dir := t.TempDir()
	write := func(name, key string) {
		var buf bytes.Buffer
		w := wds.NewWriter(&buf)
		if err := w.Write(key, map[string][]byte{"jpg": make([]byte, 700), "cls": []byte("3")}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.tar", "sample-a")
	write("b.tar", "sample-b")
	for _, key := range []string{wds.HeaderDigest, wds.HeaderDigestSHA256} {
		digest := digestOf(t, filepath.Join(dir, "b.tar"), key)
		if _, _, err := wds.VerifyShard(dir, 0, shardEntry(t, dir, "b.tar", key, digest)); err != nil {
			t.Fatalf("%s: b.tar against its own digest: %v", key, err)
		}
		_, _, err := wds.VerifyShard(dir, 0, shardEntry(t, dir, "a.tar", key, digest))
		if !errors.Is(err, format.ErrCorrupt) || !strings.Contains(err.Error(), key) {
			t.Fatalf("%s: a.tar against b.tar's digest: %v", key, err)
		}
	}
}

// digestOf computes the header digest of the tar at path under key the
// way the definition says, independently of Scan: the hash of every byte
// archive/tar reads while it skips member data by seeking.
func digestOf(t *testing.T, path, key string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h hash.Hash = xxh3.New128()
	if key == wds.HeaderDigestSHA256 {
		h = sha256.New()
	}
	tr := tar.NewReader(&hashingSeeker{r: bytes.NewReader(b), h: h})
	for {
		if _, err := tr.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hashingSeeker writes what is read through it to h; seeks are not hashed.
type hashingSeeker struct {
	r *bytes.Reader
	h hash.Hash
}

func (s *hashingSeeker) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.h.Write(p[:n])
	return n, err
}

func (s *hashingSeeker) Seek(off int64, whence int) (int64, error) { return s.r.Seek(off, whence) }
