package agentapi

import (
	"errors"
	"fmt"
)

// Code classifies an error reply. The set is closed; clients map unknown
// codes to CodeInternal.
type Code string

// Error codes.
const (
	// CodeBadRequest: the request is malformed or names an unknown handle.
	CodeBadRequest Code = "bad_request"
	// CodeVersion: no protocol version both sides speak.
	CodeVersion Code = "version"
	// CodeNotFound: the dataset, index or shard does not exist.
	CodeNotFound Code = "not_found"
	// CodePermission: the store refused the credentials.
	CodePermission Code = "permission"
	// CodeCorrupt: a shard or index failed validation.
	CodeCorrupt Code = "corrupt"
	// CodeInvalid: an argument is invalid (unknown algorithm, bad size).
	CodeInvalid Code = "invalid"
	// CodeCacheLimit: the cache limit cannot hold what is needed.
	CodeCacheLimit Code = "cache_limit"
	// CodeTimeout: a wait inside the agent passed its deadline.
	CodeTimeout Code = "timeout"
	// CodeClosed: the agent is shutting down.
	CodeClosed Code = "closed"
	// CodeInternal: anything else.
	CodeInternal Code = "internal"
)

// Sentinels matching *Error by code with errors.Is.
var (
	ErrBadRequest = errors.New("agentapi: bad request")
	ErrVersion    = errors.New("agentapi: protocol version mismatch")
	ErrNotFound   = errors.New("agentapi: not found")
	ErrPermission = errors.New("agentapi: permission denied")
	ErrCorrupt    = errors.New("agentapi: corrupt data")
	ErrInvalid    = errors.New("agentapi: invalid argument")
	ErrCacheLimit = errors.New("agentapi: cache limit too small")
	ErrTimeout    = errors.New("agentapi: timeout")
	ErrClosed     = errors.New("agentapi: agent closed")
	ErrInternal   = errors.New("agentapi: internal error")
)

var codeSentinel = map[Code]error{
	CodeBadRequest: ErrBadRequest,
	CodeVersion:    ErrVersion,
	CodeNotFound:   ErrNotFound,
	CodePermission: ErrPermission,
	CodeCorrupt:    ErrCorrupt,
	CodeInvalid:    ErrInvalid,
	CodeCacheLimit: ErrCacheLimit,
	CodeTimeout:    ErrTimeout,
	CodeClosed:     ErrClosed,
	CodeInternal:   ErrInternal,
}

// Error is an error reply.
type Error struct {
	Op      string `json:"op"`
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// Error formats the reply as "agent: CODE: message".
func (e *Error) Error() string { return fmt.Sprintf("agent: %s: %s", e.Code, e.Message) }

// Is matches the sentinel of e's code.
func (e *Error) Is(target error) bool {
	s, ok := codeSentinel[e.Code]
	if !ok {
		s = ErrInternal
	}
	return target == s
}
