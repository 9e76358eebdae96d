package storage

import (
	"context"
	"fmt"
	"os"
	"sync"
)

// PublishOptions tunes a Publisher. A nil *PublishOptions means the
// defaults.
type PublishOptions struct {
	// Prefix is prepended to each file's base name to form its key
	// ("train/" puts shard.00000.mds at train/shard.00000.mds).
	Prefix string
	// Concurrency bounds the uploads in flight. Zero means 4.
	Concurrency int
	// RemoveLocal deletes each local file once it is uploaded (MosaicML's
	// keep_local=False).
	RemoveLocal bool
	// Last reports files that must be uploaded after every file handed over
	// before them has been uploaded. Nil means IsIndexKey (index.json).
	Last func(basename string) bool
	// Write is passed to every upload; nil means the defaults.
	Write *WriteOptions
}

// Publisher uploads the files a dataset writer finishes to a Bucket, in the
// background, in parallel, and index files last. Its OnFileDone method has
// the signature of the MDS writer's OnFileDone hook:
//
//	pub := storage.NewPublisher(ctx, bucket, nil)
//	w, err := mds.NewWriter(dir, &mds.WriterOptions{OnFileDone: pub.OnFileDone, ...})
//	... write samples, w.Finish() ...
//	err = pub.Wait()
//
// A Publisher holds the context it was created with (it is a per-job object)
// and uses it for every upload. It is safe for concurrent use. After the
// first failed upload, OnFileDone and Wait return that error.
type Publisher struct {
	ctx  context.Context
	b    Bucket
	opts PublishOptions
	sem  chan struct{}
	wg   sync.WaitGroup

	// mu guards err.
	mu  sync.Mutex
	err error
}

// NewPublisher returns a Publisher uploading to b. opts may be nil.
func NewPublisher(ctx context.Context, b Bucket, opts *PublishOptions) *Publisher {
	var o PublishOptions
	if opts != nil {
		o = *opts
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Last == nil {
		o.Last = IsIndexKey
	}
	return &Publisher{ctx: ctx, b: b, opts: o, sem: make(chan struct{}, o.Concurrency)}
}

// OnFileDone hands over the finished local file localPath, to be stored
// under the key Prefix+basename. Ordinary files are uploaded in the
// background (OnFileDone blocks only while Concurrency uploads are already
// running); a file for which Last reports true is uploaded after all
// earlier uploads have succeeded, before OnFileDone returns.
func (p *Publisher) OnFileDone(basename, localPath string) error {
	if err := p.failed(); err != nil {
		return err
	}
	if p.opts.Last(basename) {
		if err := p.Wait(); err != nil {
			return err
		}
		return p.upload(basename, localPath)
	}
	select {
	case p.sem <- struct{}{}:
	case <-p.ctx.Done():
		return p.fail(fmt.Errorf("storage: publish %s: %w", basename, context.Cause(p.ctx)))
	}
	p.wg.Add(1)
	go func() {
		defer func() { <-p.sem; p.wg.Done() }()
		_ = p.upload(basename, localPath) // recorded by fail
	}()
	return nil
}

// upload stores one file and records a failure.
func (p *Publisher) upload(basename, localPath string) error {
	key := p.opts.Prefix + basename
	if err := UploadFile(p.ctx, p.b, key, localPath, p.opts.Write); err != nil {
		return p.fail(err)
	}
	if p.opts.RemoveLocal {
		if err := os.Remove(localPath); err != nil {
			return p.fail(fmt.Errorf("storage: publish %s: remove local copy: %w", basename, err))
		}
	}
	return nil
}

func (p *Publisher) fail(err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
	return p.err
}

func (p *Publisher) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Wait waits for every upload handed over so far and returns the first
// error any of them met.
func (p *Publisher) Wait() error {
	p.wg.Wait()
	return p.failed()
}
