package agent

import (
	"context"
	"errors"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/filestore"
)

// heldIndex is a bucket whose index.json reads wait, once reached is
// closed, until release is closed (or their context ends).
type heldIndex struct {
	storage.Bucket
	once             sync.Once
	reached, release chan struct{}
}

func (h *heldIndex) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if key == format.IndexFile {
		h.once.Do(func() { close(h.reached) })
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.Bucket.NewRangeReader(ctx, key, off, n)
}

// TestReusedLocalRefusedWhileOpening: a dataset whose open is still
// reading its index (on its way into the local directory) holds that
// directory: another remote's dataset opened into it meanwhile is refused
// as a reused local directory, and the first then opens. Before, the
// check saw only the datasets already open, so the second opened (and
// wrote its index into the directory the first was caching into) and
// the first was refused once its index was in.
func TestReusedLocalRefusedWhileOpening(t *testing.T) {
	h := startAgent(t, 10, nil)
	held := &heldIndex{reached: make(chan struct{}), release: make(chan struct{})}
	released := sync.OnceFunc(func() { close(held.release) })
	defer released()
	h.a.registry.Register("held", func(ctx context.Context, u *url.URL) (storage.Bucket, error) {
		b, err := filestore.Open(ctx, &url.URL{Scheme: "file", Path: u.Path})
		if err != nil {
			return nil, err
		}
		held.Bucket = b
		return held, nil
	})
	other := filepath.Join(filepath.Dir(h.remote), "other")
	writeDataset(t, other, 10, 1<<10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := agentapi.World{WorldSize: 1, LocalWorldSize: 1, NumWorkers: 1}
	first := agentapi.Dataset{Remote: "held://" + h.remote, Local: h.local, BatchSize: 4}
	opened := make(chan error, 1)
	go func() {
		_, err := h.dial().Open(ctx, agentapi.Open{Dataset: first, Job: "a", World: w})
		opened <- err
	}()
	select {
	case <-held.reached:
	case <-ctx.Done():
		t.Fatal("the first dataset's index was not read in a minute")
	}
	second := agentapi.Dataset{Remote: other, Local: h.local, BatchSize: 4}
	_, err := h.dial().Open(ctx, agentapi.Open{Dataset: second, Job: "b", World: w})
	if !errors.Is(err, agentapi.ErrInvalid) || !strings.Contains(err.Error(), "reused local directory") {
		t.Errorf("another remote into %s while the first dataset opens there: %v, want ErrInvalid (reused local directory)", h.local, err)
	}
	released()
	if err := <-opened; err != nil {
		t.Errorf("the first dataset, once its index is in: %v", err)
	}
}
