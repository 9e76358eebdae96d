//go:build !(libjpeg && cgo)

package libjpeg

// Available reports whether libjpeg-turbo is built in.
const Available = false

// Decoder is one image being decoded. Without libjpeg-turbo it cannot be
// made.
type Decoder struct{}

// Open returns ErrUnavailable: the program was built without libjpeg-turbo.
func Open(src []byte) (*Decoder, error) { return nil, ErrUnavailable }

// Header is never reached without libjpeg-turbo.
func (d *Decoder) Header() Header { return Header{} }

// Start is never reached without libjpeg-turbo.
func (d *Decoder) Start(num int, fast bool) (w, h int, err error) { return 0, 0, ErrUnavailable }

// Read is never reached without libjpeg-turbo.
func (d *Decoder) Read(dst []byte, x0, y0, x1, y1 int) (xoff, width int, err error) {
	return 0, 0, ErrUnavailable
}

// Close does nothing without libjpeg-turbo.
func (d *Decoder) Close() {}

// Weights are one axis's resampling weights (see the libjpeg build).
type Weights struct {
	Start, N, K []int32
	Max         int
	Identity    bool
}

// Resample returns ErrUnavailable without libjpeg-turbo.
func Resample(dst, src, tmp []byte, w, h, ow, oh int, kx, ky *Weights, flip, chw bool) error {
	return ErrUnavailable
}
