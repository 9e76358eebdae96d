package cli

import (
	"context"
	"fmt"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/stream"
)

// readSimTarIndex reads the index of a WebDataset tar dataset as the
// stream does: the shards of a tar dataset spec (a brace pattern, a "::"
// list or a .tar URL: stream.ParseTarDataset) with the index beside
// them or one built from their headers, or, with every, the tars of a
// directory or store root that holds no index.json. It returns the index
// as index.json's bytes and ok false when src is no tar dataset.
func readSimTarIndex(ctx context.Context, e *env, src string, every bool) (data []byte, name string, ok bool, err error) {
	td, err := stream.ParseTarDataset(src)
	if err != nil {
		return nil, "", true, fmt.Errorf("simulate: %w", err)
	}
	root, keys := src, []string(nil)
	switch {
	case td != nil:
		root, keys = td.Root, td.Keys
	case !every:
		return nil, "", false, nil
	}
	b, err := openStore(ctx, e, root)
	if err != nil {
		return nil, "", true, fmt.Errorf("simulate: %w", err)
	}
	defer b.Close()
	idx, err := stream.ReadTarIndex(ctx, b, keys)
	if err != nil {
		if td == nil {
			return nil, "", false, nil // no tars either: the caller's error stands
		}
		return nil, "", true, fmt.Errorf("simulate: %s: %w", src, err)
	}
	return format.AppendIndex(nil, idx), src, true, nil
}
