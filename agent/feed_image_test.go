package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"net"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/agentapi"
	"github.com/sluicedata/sluice/vision"
	"github.com/sluicedata/sluice/vision/libjpeg"
)

func testJPEG(t *testing.T, w, h int) []byte {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{uint8(x * 3), uint8(y * 5), uint8(x + y), 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestImageTransform: the "image" transform decodes into the sample's
// slot of the batch, in place, the pixels vision.Decode gives for the
// sample's (seed, epoch, ID), and refuses bad parameters as invalid.
func TestImageTransform(t *testing.T) {
	col := agentapi.FeedColumn{Name: "img", Encoding: "jpeg", Kind: agentapi.FeedVar}
	params := json.RawMessage(`{"size": [24, 32], "crop": "random_resized", "scale": [0.2, 1], "flip": true, "seed": 9}`)
	tr, err := feedTransforms()["image"](col, params)
	if err != nil {
		t.Fatal(err)
	}
	out := tr.Out()
	if out.Kind != agentapi.FeedFixed || out.DType != "uint8" || len(out.Shape) != 3 || out.Shape[0] != 3 ||
		out.Shape[1] != 24 || out.Shape[2] != 32 || out.Encoding != "ndarray:uint8:3,24,32" {
		t.Fatalf("out %+v", out)
	}
	src := testJPEG(t, 80, 60)
	spec := vision.Spec{Height: 24, Width: 32, RandomResizedCrop: true, Scale: [2]float64{0.2, 1}, Flip: true, Seed: 9, Layout: vision.CHW}
	slot := make([]byte, 0, 24*32*3)
	seen := map[string]bool{}
	for id := int64(0); id < 8; id++ {
		got, err := tr.Append(slot, src, FeedSample{Sample: id, Epoch: 2, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 24*32*3 || &got[0] != &slot[:1][0] {
			t.Fatalf("sample %d: %d bytes, in place %v", id, len(got), &got[0] == &slot[:1][0])
		}
		want, err := vision.Decode(nil, src, &spec, 2, id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Pix) {
			t.Fatalf("sample %d: pixels differ from vision.Decode", id)
		}
		seen[string(got)] = true
	}
	if len(seen) < 6 {
		t.Fatalf("8 samples gave %d distinct augmentations", len(seen))
	}
	if _, err := tr.Append(slot, []byte("not an image"), FeedSample{}); !errors.Is(err, vision.ErrImage) {
		t.Fatalf("bad image: %v", err)
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"size": [0, 3]}`, `{"size": [4]}`, `{"size": [4, 4], "layout": "cwh"}`,
		`{"size": [4, 4], "crop": "centre"}`, `{"size": [4, 4], "scale": [0.5, 1]}`, `{"size": [4, 4], "crop": "random_resized", "scale": [0.9, 0.1]}`,
		`{"size": [4, 4], "colour": true}`} {
		if _, err := newImageTransform(col, json.RawMessage(bad)); !errors.Is(err, agentapi.ErrInvalid) {
			t.Errorf("params %s: %v", bad, err)
		}
	}
	if _, err := newImageTransform(agentapi.FeedColumn{Name: "n", Encoding: "int", Kind: agentapi.FeedFixed}, params); !errors.Is(err, agentapi.ErrInvalid) {
		t.Errorf("int column: %v", err)
	}
	hwc, err := newImageTransform(col, json.RawMessage(`{"size": [5, 7], "layout": "hwc"}`))
	if err != nil || hwc.Out().Shape[0] != 5 || hwc.Out().Shape[2] != 3 {
		t.Fatalf("hwc: %v %+v", err, hwc)
	}
}

// TestHelloAnnouncesImageDecoder: the hello reply names the decoder of
// this build's image transform (libjpeg-turbo only with -tags libjpeg and
// cgo), also to a version-1 client, and exactly one of the two.
func TestHelloAnnouncesImageDecoder(t *testing.T) {
	h := startAgent(t, 10, nil)
	want, other := agentapi.FeatureImageGo, agentapi.FeatureImageLibjpeg
	if libjpeg.Available {
		want, other = other, want
	}
	for _, v := range []int{1, agentapi.Version} {
		nc, err := net.Dial("unix", h.sock)
		if err != nil {
			t.Fatal(err)
		}
		fc := &feedClient{t: t, uc: nc.(*net.UnixConn)}
		var hello agentapi.Hello
		fc.call(agentapi.Hello{Op: agentapi.OpHello, Version: v, MinVersion: 1}, &hello)
		nc.Close()
		if !hello.HasFeature(want) || hello.HasFeature(other) {
			t.Fatalf("version %d: features %q, want %q and not %q", v, hello.Features, want, other)
		}
	}
	c, err := agentapi.Dial(context.Background(), h.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 0
	for _, f := range c.Features {
		if f == want {
			n++
		}
		if f == other {
			n = -1
			break
		}
	}
	if n != 1 {
		t.Fatalf("client features %q, want %q once and not %q", c.Features, want, other)
	}
}

// patchJPEGSize rewrites the frame header (SOF0-2) of a JPEG to declare
// h×w pixels, leaving the scan as it was.
func patchJPEGSize(t *testing.T, src []byte, h, w int) []byte {
	b := bytes.Clone(src)
	for i := 2; i+9 < len(b); {
		if b[i] != 0xFF {
			t.Fatalf("marker expected at %d", i)
		}
		m, n := b[i+1], int(b[i+2])<<8|int(b[i+3])
		if m >= 0xC0 && m <= 0xC2 {
			b[i+5], b[i+6], b[i+7], b[i+8] = byte(h>>8), byte(h), byte(w>>8), byte(w)
			return b
		}
		i += 2 + n
	}
	t.Fatal("no frame header")
	return nil
}

// TestImageTransformBadImagesAreCorrupt: an image declaring more pixels
// than the limit (refused from its header), bytes that are no image and
// a truncated JPEG fail as corrupt data: the wire code the client maps to
// CorruptDataError (they went out as "internal"), with vision's message
// naming the problem; bad parameters go out as invalid arguments. A batch
// of failures reports its first sample and how many more failed.
func TestImageTransformBadImagesAreCorrupt(t *testing.T) {
	col := agentapi.FeedColumn{Name: "img", Encoding: "bytes", Kind: agentapi.FeedVar}
	tr, err := newImageTransform(col, json.RawMessage(`{"size": [8, 8]}`))
	if err != nil {
		t.Fatal(err)
	}
	good := testJPEG(t, 40, 30)
	for name, src := range map[string][]byte{
		"huge":      patchJPEGSize(t, good, 12000, 12000),
		"garbage":   []byte("\xff\xd8\xff not a jpeg at all"),
		"empty":     nil,
		"truncated": good[:len(good)/2],
	} {
		_, err := tr.Append(make([]byte, 0, 8*8*3), src, FeedSample{Sample: 3})
		if !errors.Is(err, vision.ErrImage) || !errors.Is(err, agentapi.ErrCorrupt) {
			t.Fatalf("%s: %v", name, err)
		}
		if e := errorReply(fmt.Errorf("agent: feed: column %q of sample 3: %w", "img", err)); e.Code != agentapi.CodeCorrupt {
			t.Fatalf("%s: wire code %q (%s), want %q", name, e.Code, e.Message, agentapi.CodeCorrupt)
		}
		if name == "huge" && !strings.Contains(err.Error(), "12000×12000 pixels (limit 67108864)") {
			t.Fatalf("huge: %v", err)
		}
	}
	_, err = newImageTransform(col, json.RawMessage(`{"size": [0, 8]}`))
	if e := errorReply(fmt.Errorf("feed: transform: %w", err)); e.Code != agentapi.CodeInvalid {
		t.Fatalf("bad parameters: wire code %q (%s), want %q", e.Code, e.Message, agentapi.CodeInvalid)
	}
	bad := corruptImage{fmt.Errorf("%w: x", vision.ErrImage)}
	err = firstOf([]error{nil, bad, nil, bad, bad})
	if !errors.Is(err, agentapi.ErrCorrupt) || !strings.HasSuffix(err.Error(), "x (and 2 more samples of the batch)") {
		t.Fatalf("batch: %v", err)
	}
	if firstOf([]error{nil, nil}) != nil {
		t.Fatal("no failure")
	}
}
