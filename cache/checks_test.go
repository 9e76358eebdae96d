package cache_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/sluicedata/sluice/cache"
)

// TestLaterRegistrationsChecksApply: two jobs register one dataset
// directory; the first asks for no check of the downloads, the second
// for one (MosaicML's validate_hash). The second's check runs on every
// download after it registered, whichever job's read starts it; a third
// registration with the same key adds nothing, and one with another key
// adds its own. Before, the first registration's Source decided for
// every job, and the second's validate_hash was silently not applied.
func TestLaterRegistrationsChecksApply(t *testing.T) {
	ctx := context.Background()
	c, err := cache.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, _, _ := makeSource(t, 4, 1000, false)
	src.Attempts = 1
	plain, err := c.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	errBad := errors.New("digest differs")
	var runs [2]int
	withCheck := func(key string, run *int, fail bool) *cache.Source {
		s := *src
		s.VerifyKey = key
		s.Shards = make([]cache.Shard, len(src.Shards))
		for i, sh := range src.Shards {
			f := sh.Files[0]
			f.Verify = func(r io.Reader) error {
				*run++
				if _, err := io.Copy(io.Discard, r); err != nil {
					return err
				}
				if fail && i == 2 {
					return errBad
				}
				return nil
			}
			s.Shards[i] = cache.Shard{Files: []cache.File{f}}
		}
		return &s
	}
	l, err := plain.Acquire(ctx, 0) // before the check is registered
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	checked, err := c.Add(ctx, withCheck("sha1", &runs[0], true))
	if err != nil {
		t.Fatal(err)
	}
	if checked != plain {
		t.Fatal("the second registration got a Dataset of its own")
	}
	// The same key again: not added twice.
	if _, err := c.Add(ctx, withCheck("sha1", &runs[0], true)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, withCheck("md5", &runs[1], false)); err != nil {
		t.Fatal(err)
	}
	// Read through the first job's registration: the checks still run.
	l, err = plain.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if runs != [2]int{1, 1} {
		t.Fatalf("shard 1's download ran the sha1 check %d times and the md5 check %d times, want 1 and 1", runs[0], runs[1])
	}
	if _, err := plain.Acquire(ctx, 2); !errors.Is(err, errBad) {
		t.Fatalf("shard 2, whose bytes fail the later registration's check: %v, want its error", err)
	}
}
