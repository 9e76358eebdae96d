package agent

import (
	"context"
	"errors"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/storage"
)

// classify maps errors of the packages the agent serves to a wire code.
func classify(err error) agentapi.Code {
	switch {
	case errors.Is(err, format.ErrCorrupt):
		return agentapi.CodeCorrupt
	case errors.Is(err, storage.ErrNotExist):
		return agentapi.CodeNotFound
	case errors.Is(err, storage.ErrPermission):
		return agentapi.CodePermission
	case errors.Is(err, context.DeadlineExceeded):
		return agentapi.CodeTimeout
	}
	return agentapi.CodeInternal
}

// streamOpener returns the production opener: datasets are stream.Datasets
// on the node cache.
func streamOpener(reg *storage.Registry) opener {
	return func(ctx context.Context, ds agentapi.Dataset) (source, error) {
		return nil, errors.New("agent: stream datasets are not wired yet")
	}
}
