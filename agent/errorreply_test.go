package agent

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/storage"
)

// TestErrorReplyChecksum: a shard whose body failed the store's checksum
// on every download attempt reaches the client as corrupt data (Python's
// CorruptDataError), as a size that differs from the index does, not as
// an internal error (the base SluiceError).
func TestErrorReplyChecksum(t *testing.T) {
	err := fmt.Errorf("cache: download %s: %d attempts failed, last: %w", "s3://b/shard.00003.mds", 2,
		fmt.Errorf("retry: read s3://b/shard.00003.mds: %w",
			fmt.Errorf("s3store: get s3://b/shard.00003.mds: the body's CRC64NVME is x, the store's y: %w", storage.ErrChecksum)))
	if e := errorReply(err); e.Code != agentapi.CodeCorrupt {
		t.Fatalf("wire code %q for %v, want %q", e.Code, err, agentapi.CodeCorrupt)
	}
	if e := errorReply(errors.Join(errors.New("other"), storage.ErrChecksum)); e.Code != agentapi.CodeCorrupt {
		t.Fatalf("joined: wire code %q", e.Code)
	}
}
