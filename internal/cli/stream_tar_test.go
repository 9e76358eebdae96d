package cli

import (
	"strings"
	"testing"
)

// TestStreamLocalTarShard streams one local WebDataset tar named by its
// path, without --local, as a user of webdataset would name a shard. Before,
// the command looked for PATH/index.json and failed ("open
// .../a-0.tar/index.json: not a directory").
func TestStreamLocalTarShard(t *testing.T) {
	dir := writeTwoTars(t)
	out, err := runCLI(t, "stream", dir+"/a-0.tar", "--json")
	if err != nil {
		t.Fatalf("stream a-0.tar: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"samples":2,`) {
		t.Errorf("stream a-0.tar: want 2 samples:\n%s", out)
	}
}
