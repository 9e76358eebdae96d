package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"net"
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
	if len(c.Features) != 1 || c.Features[0] != want {
		t.Fatalf("client features %q, want [%q]", c.Features, want)
	}
}
