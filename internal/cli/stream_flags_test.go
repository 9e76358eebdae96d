package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestStreamNamesBadFlags: a bad --cache-limit or --epoch-size given to
// `sluice stream` (indexed, or a tar dataset read with --no-index) is
// refused naming the flag, as bench, simulate and convert name theirs.
// Before, the error was the parser's alone ('stream: bad byte count
// "10gigs"'), which does not say which of the command's sizes it was.
func TestStreamNamesBadFlags(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "remote")
	writeMetricsDataset(t, remote)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cache-limit", "10gigs"}, `stream: --cache-limit: stream: bad byte count "10gigs"`},
		{[]string{"--epoch-size", "many"}, "stream: --epoch-size: "},
		{[]string{"--no-index", "--cache-limit", "-1kb"}, `stream: --cache-limit: stream: bad byte count "-1kb"`},
	} {
		args := append([]string{"stream", remote, "--batch-size", "4"}, c.args...)
		out, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v\n%s\nwant an error saying %q", c.args, err, out, c.want)
		}
	}
}
