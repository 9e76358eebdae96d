package cli

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progressValues lists the --progress values every command accepts, for
// their help text: the same four everywhere (convert, cp, write).
const progressValues = "auto (a bar on a terminal, lines otherwise), bar, plain, none"

// progressMode is a --progress value.
type progressMode string

// parseProgress validates a --progress value.
func parseProgress(s string) (progressMode, error) {
	switch s {
	case "auto", "bar", "plain", "none":
		return progressMode(s), nil
	}
	return "", fmt.Errorf("--progress must be auto, bar, plain or none, got %q", s)
}

// resolve turns auto into bar on a terminal and plain otherwise.
func (m progressMode) resolve(w io.Writer) progressMode {
	if m != "auto" {
		return m
	}
	if isTerminal(w) {
		return "bar"
	}
	return "plain"
}

// show reports whether any progress is drawn on w.
func (m progressMode) show(w io.Writer) bool { return m.resolve(w) != "none" }

// throttledLine prints throttled one-line progress reports ("NAME: TEXT"),
// at most one per interval, and a last one at done.
type throttledLine struct {
	mu       sync.Mutex
	w        io.Writer
	name     string
	interval time.Duration
	last     time.Time
	text     string
}

func newThrottledLine(w io.Writer, name string) *throttledLine {
	return &throttledLine{w: w, name: name, interval: 2 * time.Second, last: time.Now()}
}

// update records text and prints it if the interval has passed.
func (p *throttledLine) update(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.text = text
	if time.Since(p.last) >= p.interval {
		p.last = time.Now()
		fmt.Fprintf(p.w, "%s: %s\n", p.name, text)
	}
}

// finish records text and prints it, whatever the interval.
func (p *throttledLine) finish(text string) {
	p.mu.Lock()
	p.text = text
	p.mu.Unlock()
	p.done()
}

// done prints the last text recorded.
func (p *throttledLine) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.text != "" {
		fmt.Fprintf(p.w, "%s: %s\n", p.name, p.text)
	}
}
