package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ErrBadState marks a state dict that cannot be decoded or used.
var ErrBadState = errors.New("plan: bad state")

// maxStateSize bounds the encoded state: MosaicML keeps it in one shared
// memory page.
const maxStateSize = 4096

// State is the resumption state, in exactly the JSON shape of MosaicML's
// StreamingDataset.state_dict() (spec §13.4):
//
//	{"epoch": 0, "initial_physical_nodes": 1, "num_canonical_nodes": 1, "sample_in_epoch": 100, "shuffle_seed": 9176}
//
// AppendJSON writes that exact text (sorted keys, Python's separators;
// encoding/json compacts MarshalJSON's output), and ParseState /
// UnmarshalJSON read either side's output, including older MosaicML
// checkpoints that lack initial_physical_nodes.
type State struct {
	// Epoch is the epoch in progress (-1 before any iteration).
	Epoch int64
	// SampleInEpoch counts the samples of Epoch consumed over all ranks.
	SampleInEpoch int64
	// NumCanonicalNodes is the canonical node count in effect (0: unknown).
	NumCanonicalNodes int
	// ShuffleSeed is the seed in effect.
	ShuffleSeed int64
	// InitialPhysicalNodes is the physical node count of the first run
	// (0: absent, as in checkpoints older than MosaicML 0.7).
	InitialPhysicalNodes int
}

// MarshalJSON encodes s as Python's json.dumps(state, sort_keys=True) would.
// An absent InitialPhysicalNodes is omitted.
func (s State) MarshalJSON() ([]byte, error) { return s.AppendJSON(nil), nil }

// AppendJSON appends the encoding of MarshalJSON to dst.
func (s State) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"epoch": `...)
	dst = strconv.AppendInt(dst, s.Epoch, 10)
	if s.InitialPhysicalNodes > 0 {
		dst = append(dst, `, "initial_physical_nodes": `...)
		dst = strconv.AppendInt(dst, int64(s.InitialPhysicalNodes), 10)
	}
	dst = append(dst, `, "num_canonical_nodes": `...)
	if s.NumCanonicalNodes > 0 {
		dst = strconv.AppendInt(dst, int64(s.NumCanonicalNodes), 10)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `, "sample_in_epoch": `...)
	dst = strconv.AppendInt(dst, s.SampleInEpoch, 10)
	dst = append(dst, `, "shuffle_seed": `...)
	dst = strconv.AppendInt(dst, s.ShuffleSeed, 10)
	return append(dst, '}')
}

// UnmarshalJSON decodes a state written by Sluice or MosaicML.
func (s *State) UnmarshalJSON(b []byte) error {
	v, err := ParseState(b)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseState decodes a state dict. It accepts MosaicML's shared-memory form
// (trailing NUL bytes), ignores unknown keys, requires epoch,
// sample_in_epoch and shuffle_seed as integers, and accepts a missing or
// null initial_physical_nodes and num_canonical_nodes.
func ParseState(b []byte) (State, error) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) > maxStateSize {
		return State{}, fmt.Errorf("%w: %d bytes, more than %d", ErrBadState, len(b), maxStateSize)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return State{}, fmt.Errorf("%w: %v", ErrBadState, err)
	}
	if raw == nil {
		return State{}, fmt.Errorf("%w: not a JSON object", ErrBadState)
	}
	field := func(name string, required bool, min int64) (int64, error) {
		m, ok := raw[name]
		if !ok || string(m) == "null" {
			if required {
				return 0, fmt.Errorf("%w: missing %q", ErrBadState, name)
			}
			return 0, nil
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(m)), 10, 64)
		if err != nil {
			// Python may write 5.0 for a float that holds an integer.
			f, ferr := strconv.ParseFloat(string(bytes.TrimSpace(m)), 64)
			if ferr != nil || f != float64(int64(f)) {
				return 0, fmt.Errorf("%w: %q is %s, not an integer", ErrBadState, name, m)
			}
			n = int64(f)
		}
		if n < min {
			return 0, fmt.Errorf("%w: %q is %d, below %d", ErrBadState, name, n, min)
		}
		return n, nil
	}
	var s State
	var err error
	if s.Epoch, err = field("epoch", true, -1); err != nil {
		return State{}, err
	}
	if s.SampleInEpoch, err = field("sample_in_epoch", true, 0); err != nil {
		return State{}, err
	}
	if s.ShuffleSeed, err = field("shuffle_seed", true, 0); err != nil {
		return State{}, err
	}
	ncn, err := field("num_canonical_nodes", false, 0)
	if err != nil {
		return State{}, err
	}
	ipn, err := field("initial_physical_nodes", false, 0)
	if err != nil {
		return State{}, err
	}
	const maxNodes = 1 << 20
	if ncn > maxNodes || ipn > maxNodes {
		return State{}, fmt.Errorf("%w: node counts %d/%d too large", ErrBadState, ncn, ipn)
	}
	s.NumCanonicalNodes, s.InitialPhysicalNodes = int(ncn), int(ipn)
	return s, nil
}
