//go:build libjpeg && cgo

package libjpeg

/*
#cgo LDFLAGS: -ljpeg
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>

// One image being decoded. Every libjpeg call happens inside a function
// that has set jb: libjpeg's default error handler would exit the process.
typedef struct {
	struct jpeg_decompress_struct d;
	struct jpeg_error_mgr jerr;
	struct jpeg_progress_mgr prog;
	jmp_buf jb;
	int created;
	int eof;
	int max_scans;
	char msg[JMSG_LENGTH_MAX];
} sl_jpeg;

static void sl_error_exit(j_common_ptr c) {
	sl_jpeg *s = (sl_jpeg *)c->client_data;
	(*c->err->format_message)(c, s->msg);
	longjmp(s->jb, 1);
}

// Warnings are silent, except running out of data: libjpeg pads a
// truncated file with gray and goes on, where we refuse the image.
static void sl_emit_message(j_common_ptr c, int level) {
	sl_jpeg *s = (sl_jpeg *)c->client_data;
	if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
		s->eof = 1;
	}
}

static void sl_progress(j_common_ptr c) {
	sl_jpeg *s = (sl_jpeg *)c->client_data;
	if (s->d.input_scan_number > s->max_scans) {
		snprintf(s->msg, sizeof s->msg, "more than %d progressive scans", s->max_scans);
		longjmp(s->jb, 1);
	}
}

static sl_jpeg *sl_new(int max_scans) {
	sl_jpeg *s = calloc(1, sizeof(sl_jpeg));
	if (s == NULL) {
		return NULL;
	}
	s->max_scans = max_scans;
	s->d.err = jpeg_std_error(&s->jerr);
	s->jerr.error_exit = sl_error_exit;
	s->jerr.emit_message = sl_emit_message;
	s->d.client_data = s;
	s->prog.progress_monitor = sl_progress;
	return s;
}

static void sl_free(sl_jpeg *s) {
	if (s->created) {
		jpeg_destroy_decompress(&s->d);
	}
	free(s);
}

static int sl_open(sl_jpeg *s, const unsigned char *buf, unsigned long n,
		int *w, int *h, int *comp, int *space) {
	if (setjmp(s->jb)) {
		return -1;
	}
	jpeg_create_decompress(&s->d);
	s->created = 1;
	s->d.progress = &s->prog;
	jpeg_mem_src(&s->d, buf, n);
	jpeg_read_header(&s->d, TRUE);
	*w = s->d.image_width;
	*h = s->d.image_height;
	*comp = s->d.num_components;
	*space = s->d.jpeg_color_space;
	return s->eof ? -2 : 0;
}

static int sl_start(sl_jpeg *s, int num, int fast, long maxmem, int *w, int *h) {
	if (setjmp(s->jb)) {
		return -1;
	}
	s->d.mem->max_memory_to_use = maxmem;
	s->d.scale_num = num;
	s->d.scale_denom = 8;
	s->d.out_color_space = JCS_RGB;
	s->d.dct_method = fast ? JDCT_IFAST : JDCT_ISLOW;
	s->d.do_fancy_upsampling = fast ? FALSE : TRUE;
	jpeg_start_decompress(&s->d);
	if (s->d.output_components != 3) {
		snprintf(s->msg, sizeof s->msg, "%d output components, want 3", s->d.output_components);
		return -1;
	}
	*w = s->d.output_width;
	*h = s->d.output_height;
	return s->eof ? -2 : 0;
}

// Reads rows [y0, y1) of columns [x0, x1) (widened by libjpeg to iMCU
// boundaries: *xoff and *width say to what) into out, rows packed.
static int sl_read(sl_jpeg *s, int x0, int x1, int y0, int y1, unsigned char *out,
		int *xoff, int *width) {
	if (setjmp(s->jb)) {
		return -1;
	}
	// One column more on each side: libjpeg upsamples the chroma of the
	// first and last column of a cropped row without their neighbours.
	JDIMENSION xo = x0 > 0 ? x0 - 1 : 0;
	JDIMENSION end = (JDIMENSION)x1 < s->d.output_width ? (JDIMENSION)x1 + 1 : (JDIMENSION)x1;
	JDIMENSION wd = end - xo;
	if (xo > 0 || wd < s->d.output_width) {
		jpeg_crop_scanline(&s->d, &xo, &wd);
	}
	if (y0 > 0) {
		jpeg_skip_scanlines(&s->d, y0);
	}
	size_t stride = (size_t)wd * 3;
	while (s->d.output_scanline < (JDIMENSION)y1) {
		JSAMPROW row = out + (size_t)(s->d.output_scanline - y0) * stride;
		if (jpeg_read_scanlines(&s->d, &row, 1) != 1) {
			snprintf(s->msg, sizeof s->msg, "no scanline %d", (int)s->d.output_scanline);
			return -1;
		}
	}
	*xoff = xo;
	*width = wd;
	return s->eof ? -2 : 0;
}

// PIL's fixed-point separable resampling (22-bit weights, computed in Go):
// rows of src (w × h packed RGB) -> tmp (ow × h) -> dst (ow × oh, HWC or
// CHW, flipped if asked). A pass whose weights are the identity is
// skipped (xs == NULL or ys == NULL).
static inline unsigned char sl_clip8(int v) {
	v >>= 22;
	return v < 0 ? 0 : v > 255 ? 255 : (unsigned char)v;
}

static void sl_resample(const unsigned char *src, int w, int h,
		const int *xs, const int *xn, const int *xk, int xmax, int ow,
		const int *ys, const int *yn, const int *yk, int ymax, int oh,
		unsigned char *tmp, unsigned char *row, unsigned char *dst, int flip, int chw) {
	const unsigned char *mid = src;
	if (xs != NULL) {
		for (int y = 0; y < h; y++) {
			const unsigned char *in = src + (size_t)y * w * 3;
			unsigned char *out = tmp + (size_t)y * ow * 3;
			for (int x = 0; x < ow; x++) {
				const unsigned char *p = in + xs[x] * 3;
				const int *k = xk + x * xmax;
				int r = 1 << 21, g = 1 << 21, b = 1 << 21;
				for (int i = 0; i < xn[x]; i++) {
					r += p[3 * i] * k[i];
					g += p[3 * i + 1] * k[i];
					b += p[3 * i + 2] * k[i];
				}
				out[3 * x] = sl_clip8(r);
				out[3 * x + 1] = sl_clip8(g);
				out[3 * x + 2] = sl_clip8(b);
			}
		}
		mid = tmp;
	}
	size_t stride = (size_t)ow * 3, plane = (size_t)ow * oh;
	for (int y = 0; y < oh; y++) {
		if (ys != NULL) {
			const int *k = yk + y * ymax;
			const unsigned char *base = mid + (size_t)ys[y] * stride;
			for (size_t i = 0; i < stride; i++) {
				int ss = 1 << 21;
				for (int t = 0; t < yn[y]; t++) {
					ss += base[t * stride + i] * k[t];
				}
				row[i] = sl_clip8(ss);
			}
		} else {
			memcpy(row, mid + (size_t)y * stride, stride);
		}
		for (int x = 0; x < ow; x++) {
			int ox = flip ? ow - 1 - x : x;
			if (chw) {
				size_t o = (size_t)y * ow + ox;
				dst[o] = row[3 * x];
				dst[plane + o] = row[3 * x + 1];
				dst[2 * plane + o] = row[3 * x + 2];
			} else {
				unsigned char *o = dst + ((size_t)y * ow + ox) * 3;
				o[0] = row[3 * x];
				o[1] = row[3 * x + 1];
				o[2] = row[3 * x + 2];
			}
		}
	}
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Available reports whether libjpeg-turbo is built in.
const Available = true

// Decoder is one image being decoded: Open reads the header, Start
// chooses the scale, Read decodes a window of rows and columns. It holds C
// memory and pins the source bytes until Close, which must be called.
type Decoder struct {
	s       *C.sl_jpeg
	pin     runtime.Pinner
	hdr     Header
	started bool
	read    bool
	w, h    int
}

// Open reads the header of the JPEG in src. src must not change until
// Close.
func Open(src []byte) (*Decoder, error) {
	if len(src) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrJPEG)
	}
	s := C.sl_new(MaxScans)
	if s == nil {
		return nil, fmt.Errorf("libjpeg: out of C memory")
	}
	d := &Decoder{s: s}
	d.pin.Pin(&src[0])
	var w, h, comp, space C.int
	if rc := C.sl_open(s, (*C.uchar)(unsafe.Pointer(&src[0])), C.ulong(len(src)), &w, &h, &comp, &space); rc != 0 {
		err := d.fail(rc, "header")
		d.Close()
		return nil, err
	}
	d.hdr = Header{Width: int(w), Height: int(h), Components: int(comp)}
	switch space {
	case C.JCS_GRAYSCALE, C.JCS_YCbCr, C.JCS_RGB:
		d.hdr.RGB = true
	}
	return d, nil
}

func (d *Decoder) fail(rc C.int, stage string) error {
	if rc == -2 {
		return fmt.Errorf("%w: %s: premature end of data", ErrJPEG, stage)
	}
	return fmt.Errorf("%w: %s: %s", ErrJPEG, stage, C.GoString(&d.s.msg[0]))
}

// Header returns what the header says.
func (d *Decoder) Header() Header { return d.hdr }

// Start begins decoding at scale num/8 (1 ≤ num ≤ 16) and returns the
// decoded size (ScaledSize). fast trades accuracy for speed (the integer
// fast IDCT, no fancy upsampling); the default matches PIL's decode. The
// image must be RGB-capable (Header.RGB).
func (d *Decoder) Start(num int, fast bool) (w, h int, err error) {
	if d.started {
		return 0, 0, fmt.Errorf("libjpeg: Start called twice")
	}
	if num < 1 || num > 16 {
		return 0, 0, fmt.Errorf("libjpeg: scale %d/8 outside 1/8..16/8", num)
	}
	if !d.hdr.RGB {
		return 0, 0, fmt.Errorf("%w: %d-component colour space has no RGB conversion", ErrJPEG, d.hdr.Components)
	}
	d.started = true
	// Room for the decoder's own buffers: a progressive image keeps all
	// its coefficients (2 bytes each, up to 3 components at full size),
	// plus row buffers.
	limit := C.long(int64(d.hdr.Width)*int64(d.hdr.Height)*6 + 64<<20)
	fastC := C.int(0)
	if fast {
		fastC = 1
	}
	var cw, ch C.int
	if rc := C.sl_start(d.s, C.int(num), fastC, limit, &cw, &ch); rc != 0 {
		return 0, 0, d.fail(rc, "start")
	}
	d.w, d.h = int(cw), int(ch)
	return d.w, d.h, nil
}

// Read decodes rows [y0, y1) and columns [x0, x1) of the scaled image into
// dst as packed RGB rows. libjpeg widens the columns to its block
// boundaries: the rows hold width pixels starting at column xoff (xoff ≤
// x0, xoff+width ≥ x1). dst must hold (y1-y0) × the scaled width × 3
// bytes. Read can be called once per Start.
func (d *Decoder) Read(dst []byte, x0, y0, x1, y1 int) (xoff, width int, err error) {
	switch {
	case !d.started:
		return 0, 0, fmt.Errorf("libjpeg: Read before Start")
	case d.read:
		return 0, 0, fmt.Errorf("libjpeg: Read called twice")
	case x0 < 0 || x0 >= x1 || x1 > d.w || y0 < 0 || y0 >= y1 || y1 > d.h:
		return 0, 0, fmt.Errorf("libjpeg: window [%d,%d)×[%d,%d) outside %d×%d", x0, x1, y0, y1, d.w, d.h)
	case len(dst) < (y1-y0)*d.w*3:
		return 0, 0, fmt.Errorf("libjpeg: %d-byte buffer for %d rows of %d pixels", len(dst), y1-y0, d.w)
	}
	d.read = true
	var xo, wd C.int
	if rc := C.sl_read(d.s, C.int(x0), C.int(x1), C.int(y0), C.int(y1), (*C.uchar)(unsafe.Pointer(&dst[0])), &xo, &wd); rc != 0 {
		return 0, 0, d.fail(rc, "decode")
	}
	return int(xo), int(wd), nil
}

// Close frees the decoder's C memory and unpins the source.
func (d *Decoder) Close() {
	if d.s != nil {
		C.sl_free(d.s)
		d.s = nil
	}
	d.pin.Unpin()
}

// Weights are one axis's resampling weights in 22-bit fixed point: output
// sample i reads N[i] input samples from Start[i] with weights
// K[i*Max : i*Max+N[i]]. Identity means a one-to-one copy.
type Weights struct {
	Start, N, K []int32
	Max         int
	Identity    bool
}

func (k *Weights) check(in, out int) error {
	if k.Identity {
		if in != out {
			return fmt.Errorf("libjpeg: identity weights from %d to %d samples", in, out)
		}
		return nil
	}
	if len(k.Start) != out || len(k.N) != out || k.Max < 1 || len(k.K) < out*k.Max {
		return fmt.Errorf("libjpeg: weights for %d samples malformed", out)
	}
	for i, s := range k.Start {
		if s < 0 || k.N[i] < 0 || int(k.N[i]) > k.Max || int(s)+int(k.N[i]) > in {
			return fmt.Errorf("libjpeg: weight %d reads [%d, %d) of %d samples", i, s, s+k.N[i], in)
		}
	}
	return nil
}

// Resample resizes packed RGB src (w × h) to ow × oh into dst (HWC, or
// CHW when chw) with the given weights, flipping horizontally when flip:
// the same arithmetic as the pure-Go resampler of package vision, in C.
// tmp is scratch of at least ow × (h+1) × 3 bytes.
func Resample(dst, src, tmp []byte, w, h, ow, oh int, kx, ky *Weights, flip, chw bool) error {
	if err := kx.check(w, ow); err != nil {
		return err
	}
	if err := ky.check(h, oh); err != nil {
		return err
	}
	switch {
	case w < 1 || h < 1 || ow < 1 || oh < 1:
		return fmt.Errorf("libjpeg: resample %d×%d to %d×%d", w, h, ow, oh)
	case len(src) < w*h*3 || len(dst) < ow*oh*3 || len(tmp) < ow*(h+1)*3:
		return fmt.Errorf("libjpeg: resample buffers too small")
	}
	var xs, xn, xk, ys, yn, yk *C.int
	xmax, ymax := C.int(0), C.int(0)
	if !kx.Identity {
		xs, xn, xk = (*C.int)(&kx.Start[0]), (*C.int)(&kx.N[0]), (*C.int)(&kx.K[0])
		xmax = C.int(kx.Max)
	}
	if !ky.Identity {
		ys, yn, yk = (*C.int)(&ky.Start[0]), (*C.int)(&ky.N[0]), (*C.int)(&ky.K[0])
		ymax = C.int(ky.Max)
	}
	C.sl_resample((*C.uchar)(&src[0]), C.int(w), C.int(h), xs, xn, xk, xmax, C.int(ow),
		ys, yn, yk, ymax, C.int(oh), (*C.uchar)(&tmp[0]), (*C.uchar)(&tmp[ow*h*3]), (*C.uchar)(&dst[0]),
		cbool(flip), cbool(chw))
	return nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
