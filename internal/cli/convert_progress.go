package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/sluicedata/sluice/convert"
)

func jsonMarshalIndent(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// startConvertProgress installs a progress display on opts according to
// mode (auto, bar, plain, none) and returns a function that ends it.
func startConvertProgress(w io.Writer, mode string, opts *convert.Options) (stop func()) {
	if mode == "auto" {
		mode = "plain"
		if isTerminal(w) {
			mode = "bar"
		}
	}
	switch mode {
	case "none":
		return func() {}
	case "bar":
		return barProgress(w, opts)
	}
	// Plain periodic lines, for logs.
	opts.ProgressInterval = 10 * time.Second
	var mu sync.Mutex
	opts.Progress = func(p convert.Progress) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(w, progressLine(p))
	}
	return func() {}
}

func progressLine(p convert.Progress) string {
	s := p.Elapsed.Seconds()
	rate := 0.0
	if s > 0 {
		rate = float64(p.SamplesOut) / s
	}
	state := "converting"
	if p.Done {
		state = "done"
	}
	return fmt.Sprintf("convert: %s: %d samples in, %d written, %d skipped, %d shards, %.1f MB stored, %.0f samples/s, %s",
		state, p.SamplesIn, p.SamplesOut, p.Skipped, p.Shards, float64(p.Bytes)/1e6, rate, p.Elapsed.Round(time.Second))
}

// barLine is the short figure line next to the spinner.
func barLine(p convert.Progress) string {
	rate := 0.0
	if s := p.Elapsed.Seconds(); s > 0 {
		rate = float64(p.SamplesIn) / s
	}
	return fmt.Sprintf("%d read, %d written, %d skipped, %d shards, %.1f MB, %.0f/s",
		p.SamplesIn, p.SamplesOut, p.Skipped, p.Shards, float64(p.Bytes)/1e6, rate)
}

// barProgress draws a spinner with running figures (the input's total is
// not known up front).
func barProgress(w io.Writer, opts *convert.Options) func() {
	prog := mpb.New(mpb.WithOutput(w), mpb.WithAutoRefresh())
	var mu sync.Mutex
	var last convert.Progress
	bar := prog.New(0, mpb.SpinnerStyle(),
		mpb.PrependDecorators(decor.Name("convert")),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
			mu.Lock()
			defer mu.Unlock()
			return barLine(last)
		})),
	)
	opts.ProgressInterval = 200 * time.Millisecond
	opts.Progress = func(p convert.Progress) {
		mu.Lock()
		last = p
		mu.Unlock()
		bar.SetCurrent(p.SamplesIn)
	}
	return func() {
		bar.SetTotal(-1, true)
		prog.Wait()
	}
}
