package writepipe

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sluicedata/sluice/format"
)

// Sink is a dataset writer: format/mds, format/jsonl and format/xsv
// Writers all satisfy it.
type Sink interface {
	// Write encodes and appends one sample.
	Write(format.Sample) error
	// Finish flushes the last shard and writes index.json.
	Finish() error
	// Close abandons the dataset: no index.json is written.
	Close() error
}

// Stats counts what a Run consumed.
type Stats struct {
	Frames  int64 // batch frames
	Samples int64 // samples written
	Bytes   int64 // frame bytes read, headers included
}

// SampleError reports a sample the sink refused.
type SampleError struct {
	Index int64 // the sample's position in the stream, from 0
	Err   error
}

// Error returns a message naming the sample.
func (e *SampleError) Error() string { return fmt.Sprintf("sample %d: %v", e.Index, e.Err) }

// Unwrap returns the sink's error.
func (e *SampleError) Unwrap() error { return e.Err }

// ErrUnfinished is returned when the stream ends without its end frame;
// the dataset is abandoned (no index.json).
var ErrUnfinished = errors.New("writepipe: input ended before the end frame; dataset abandoned (no index.json written)")

type frame struct {
	body  []byte
	count int
	end   bool
	err   error
}

// Run reads frames from r and writes every sample to sink, reading the
// next frame while the current one is written. At the end frame it calls
// sink.Finish and returns. On any error (a malformed frame, a refused
// sample, a stream that stops early, ctx done) it calls sink.Close, so no
// index.json is written, and returns the error. progress, when not nil,
// is called after each frame. A sink that is a RecordSink (format/mds)
// gets each sample as an encoded record built from the frame's columns.
func Run(ctx context.Context, r *Reader, sink Sink, progress func(Stats)) (Stats, error) {
	var st Stats
	frames := make(chan frame, 1)
	free := make(chan []byte, 2)
	free <- nil
	free <- nil
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			var buf []byte
			select {
			case buf = <-free:
			case <-stop:
				return
			}
			body, n, end, err := r.Next(buf)
			select {
			case frames <- frame{body: body, count: n, end: end, err: err}:
			case <-stop:
				return
			}
			if end || err != nil {
				return
			}
		}
	}()
	fail := func(err error) (Stats, error) {
		if cerr := sink.Close(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (closing: %v)", err, cerr)
		}
		return st, err
	}
	var batch Batch
	sample := format.Sample{}
	recs := newRecordEncoder(sink, r.names) // nil: samples go through Write
	for {
		var f frame
		select {
		case f = <-frames:
		case <-ctx.Done():
			return fail(fmt.Errorf("writepipe: %w", ctx.Err()))
		}
		if f.err != nil {
			if errors.Is(f.err, io.ErrUnexpectedEOF) {
				return fail(ErrUnfinished)
			}
			return fail(f.err)
		}
		if f.end {
			st.Bytes += HeaderSize
			if err := sink.Finish(); err != nil {
				return st, err
			}
			return st, nil
		}
		if err := Parse(r.names, f.body, f.count, st.Frames, &batch); err != nil {
			return fail(err)
		}
		if recs != nil {
			recs.prepare(&batch)
		}
		for i := range batch.Len() {
			var err error
			if recs != nil {
				err = recs.write(&batch, i)
			} else if err = batch.Fill(i, sample); err == nil {
				err = sink.Write(sample)
			}
			if err != nil {
				return fail(&SampleError{Index: st.Samples, Err: err})
			}
			st.Samples++
		}
		st.Frames++
		st.Bytes += HeaderSize + int64(len(f.body))
		free <- f.body
		if progress != nil {
			progress(st)
		}
	}
}
