package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/vision"
	"github.com/sluicedata/sluice/vision/libjpeg"
)

// features is what the agent announces in its hello reply: which decoder
// its "image" transform uses, so that a client can choose the faster of
// the agent's decode and its own (the pure-Go decoders are slower per
// core than PIL; libjpeg-turbo's are faster).
func features() []string {
	if libjpeg.Available {
		return []string{agentapi.FeatureImageLibjpeg}
	}
	return []string{agentapi.FeatureImageGo}
}

// imageParams are the parameters of the "image" feed transform, as the
// client sends them (python/sluice/images.py).
type imageParams struct {
	// Size is the output's [height, width]; required.
	Size []int `json:"size"`
	// Layout is "chw" (the default, torch's) or "hwc".
	Layout string `json:"layout"`
	// Crop is "random_resized" (torchvision's RandomResizedCrop) or
	// "none" / "" (the whole image resized).
	Crop string `json:"crop"`
	// Scale and Ratio are RandomResizedCrop's ranges; empty: the
	// defaults, [0.08, 1] and [3/4, 4/3].
	Scale []float64 `json:"scale"`
	Ratio []float64 `json:"ratio"`
	// Flip flips horizontally with probability one half.
	Flip bool `json:"flip"`
	// Seed seeds every sample's draws with the epoch and the sample ID.
	Seed uint64 `json:"seed"`
	// FullDecode: see vision.Spec.
	FullDecode bool `json:"full_decode"`
	// MaxPixels bounds a source image's width × height (0: vision's
	// default).
	MaxPixels int64 `json:"max_pixels"`
}

// imageTransform decodes an encoded image column (JPEG or PNG) into a
// fixed uint8 array per sample, with the augmentation of package vision
// drawn per (seed, epoch, sample).
type imageTransform struct {
	dec *vision.Decoder
	out agentapi.FeedColumn
}

// newImageTransform is the "image" entry of feedTransforms.
func newImageTransform(col agentapi.FeedColumn, params json.RawMessage) (ColumnTransform, error) {
	switch col.Encoding {
	case "jpeg", "png", "bytes":
	default:
		return nil, fmt.Errorf("%w: image transform: column %q holds %q values, not encoded images (jpeg, png or bytes)",
			agentapi.ErrInvalid, col.Name, col.Encoding)
	}
	var p imageParams
	d := json.NewDecoder(bytes.NewReader(params))
	d.DisallowUnknownFields()
	if len(params) == 0 || d.Decode(&p) != nil {
		return nil, fmt.Errorf("%w: image transform of column %q: parameters %s: want an object with size [h, w]",
			agentapi.ErrInvalid, col.Name, params)
	}
	spec, err := p.spec()
	if err != nil {
		return nil, fmt.Errorf("%w: image transform of column %q: %v", agentapi.ErrInvalid, col.Name, err)
	}
	dec, err := vision.NewDecoder(spec, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: image transform of column %q: %v", agentapi.ErrInvalid, col.Name, err)
	}
	h, w := int64(spec.Height), int64(spec.Width)
	shape := []int64{3, h, w}
	if spec.Layout == vision.HWC {
		shape = []int64{h, w, 3}
	}
	enc := fmt.Sprintf("ndarray:uint8:%d,%d,%d", shape[0], shape[1], shape[2])
	return &imageTransform{dec: dec, out: agentapi.FeedColumn{
		Name: col.Name, Encoding: enc, Kind: agentapi.FeedFixed, DType: "uint8", Shape: shape,
	}}, nil
}

func (p *imageParams) spec() (vision.Spec, error) {
	var s vision.Spec
	if len(p.Size) != 2 || p.Size[0] < 1 || p.Size[1] < 1 {
		return s, fmt.Errorf("size %v: want [height, width], both ≥ 1", p.Size)
	}
	s.Height, s.Width = p.Size[0], p.Size[1]
	switch strings.ToLower(p.Layout) {
	case "", "chw":
		s.Layout = vision.CHW
	case "hwc":
		s.Layout = vision.HWC
	default:
		return s, fmt.Errorf("layout %q: want chw or hwc", p.Layout)
	}
	switch p.Crop {
	case "", "none":
		if p.Scale != nil || p.Ratio != nil {
			return s, fmt.Errorf("scale and ratio need crop random_resized")
		}
	case "random_resized":
		s.RandomResizedCrop = true
	default:
		return s, fmt.Errorf("crop %q: want random_resized or none", p.Crop)
	}
	for name, r := range map[string][]float64{"scale": p.Scale, "ratio": p.Ratio} {
		if r != nil && len(r) != 2 {
			return s, fmt.Errorf("%s %v: want [low, high]", name, r)
		}
	}
	if p.Scale != nil {
		s.Scale = [2]float64(p.Scale)
	}
	if p.Ratio != nil {
		s.Ratio = [2]float64(p.Ratio)
	}
	s.Flip, s.Seed, s.FullDecode, s.MaxPixels = p.Flip, p.Seed, p.FullDecode, p.MaxPixels
	if p.MaxPixels < 0 {
		return s, fmt.Errorf("max_pixels %d", p.MaxPixels)
	}
	return s, s.Check()
}

// Out is a fixed uint8 column of the output's shape.
func (t *imageTransform) Out() agentapi.FeedColumn { return t.out }

// Append decodes src into dst's room (the sample's slot in the batch).
// Bytes that are not a JPEG or PNG image, or that declare more pixels
// than the limit, fail with an error matching both vision.ErrImage and
// agentapi.ErrCorrupt (the client's CorruptDataError).
func (t *imageTransform) Append(dst, src []byte, s FeedSample) ([]byte, error) {
	m, err := t.dec.Decode(dst[len(dst):], src, s.Epoch, s.Sample)
	if err != nil {
		if errors.Is(err, vision.ErrImage) {
			err = corruptImage{err}
		}
		return dst, err
	}
	if len(dst) == 0 {
		return m.Pix, nil
	}
	return append(dst, m.Pix...), nil
}

// corruptImage is a sample's bad image: its message is vision's, and it
// matches agentapi.ErrCorrupt too, so that the client gets the error
// class of corrupt data.
type corruptImage struct{ err error }

func (e corruptImage) Error() string   { return e.err.Error() }
func (e corruptImage) Unwrap() []error { return []error{e.err, agentapi.ErrCorrupt} }
