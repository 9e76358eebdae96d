package convert

import (
	"bytes"
	"fmt"
	"image"

	"github.com/sluicedata/sluice/convert/fetch"
)

// checkImageBytes checks bytes stored as they are in a jpeg or png column
// (a WebDataset .jpg member, a bytes value the user typed as jpeg): they
// must start as an image of that type with a header that parses and at
// most fetch.MaxPixels pixels, or every reader of the dataset (MosaicML's
// included) fails on the record, or refuses it as a decompression bomb,
// during training. The body is not decoded (image folders and fetched
// URLs are, by their own checks).
func checkImageBytes(b []byte, want string) error {
	got := fetch.SniffImage(b)
	switch {
	case got == "":
		return fmt.Errorf("value is not an image (%d bytes), the column is %s", len(b), want)
	case got != want:
		return fmt.Errorf("value is a %s image, the column is %s", got, want)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("bad %s header: %w", got, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > fetch.MaxPixels {
		return fmt.Errorf("%s of %dx%d pixels is out of bounds (at most %d pixels)", got, cfg.Width, cfg.Height, fetch.MaxPixels)
	}
	return nil
}
