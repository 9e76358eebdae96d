package wds

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // registered for image.Decode
	_ "image/png"  // registered for image.Decode
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDumpPixels bounds the images AppendDump decodes: a header can claim any
// size, and the decoder would allocate it.
const maxDumpPixels = 1 << 26

// AppendDump appends the canonical JSON line of one sample (without the
// newline), the form of the reference fixtures' expected.jsonl:
//
//	{"fields": {NAME: {"raw_len": N, "raw_sha256": HEX, "v": VALUE}}, "key": KEY, "url": URL}
//
// VALUE is what WebDataset's .decode("rgb8") gives, by the field's last
// extension: image statistics {"dtype", "mean", "shape"} for jpg, jpeg and
// png (every image as 3 bands, means to 4 decimals), an integer for cls,
// cls2, class, count, index, inx and id, the decoded object for json and
// jsn, the string for txt, text and transcript, {"dtype", "shape",
// "sha256"} of the array bytes for npy, and {"b64": BASE64} otherwise or
// when a value does not decode.
func AppendDump(dst []byte, key, url string, names []string, values [][]byte) ([]byte, error) {
	type field struct {
		RawLen    int    `json:"raw_len"`
		RawSHA256 string `json:"raw_sha256"`
		V         any    `json:"v"`
	}
	line := struct {
		Fields map[string]field `json:"fields"`
		Key    string           `json:"key"`
		URL    string           `json:"url"`
	}{Fields: make(map[string]field, len(names)), Key: key, URL: url}
	for i, name := range names {
		b := values[i]
		sum := sha256.Sum256(b)
		line.Fields[name] = field{RawLen: len(b), RawSHA256: hex.EncodeToString(sum[:]), V: DecodeValue(name, b)}
	}
	out, err := json.Marshal(line)
	if err != nil {
		return dst, fmt.Errorf("wds: dump %q: %w", key, err)
	}
	return append(dst, out...), nil
}

// DecodeValue returns the canonical dump value of one field (see
// AppendDump).
func DecodeValue(name string, b []byte) any {
	ext := name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		ext = name[i+1:]
	}
	raw := map[string]string{"b64": base64.StdEncoding.EncodeToString(b)}
	switch ext {
	case "jpg", "jpeg", "png":
		if v, err := imageStats(b); err == nil {
			return v
		}
	case "cls", "cls2", "class", "count", "index", "inx", "id":
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return n
		}
	case "txt", "text", "transcript":
		if utf8.Valid(b) {
			return string(b)
		}
	case "json", "jsn":
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err == nil {
			return v
		}
	case "npy":
		if v, err := npyStats(b); err == nil {
			return v
		}
	}
	return raw
}

// imageStats decodes an image to 8-bit RGB (alpha dropped, gray and
// palettes expanded, as PIL's convert("RGB") does) and returns its shape
// and per-band means.
func imageStats(b []byte) (any, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxDumpPixels {
		return nil, fmt.Errorf("image of %dx%d pixels", cfg.Width, cfg.Height)
	}
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	r := img.Bounds()
	var sum [3]float64
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			sum[0] += float64(c.R)
			sum[1] += float64(c.G)
			sum[2] += float64(c.B)
		}
	}
	n := float64(r.Dx() * r.Dy())
	mean := make([]float64, 3)
	for i := range mean {
		// Python's round(x, 4): ties to even.
		mean[i] = math.RoundToEven(sum[i]/n*1e4) / 1e4
	}
	return map[string]any{"dtype": "uint8", "mean": mean, "shape": []int{r.Dy(), r.Dx(), 3}}, nil
}

// npyStats parses a .npy file's header and returns its dtype, shape and the
// SHA-256 of its data bytes (C order only).
func npyStats(b []byte) (any, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return nil, fmt.Errorf("not an npy file")
	}
	var hlen, start int
	switch b[6] {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return nil, fmt.Errorf("short npy header")
		}
		hlen, start = int(binary.LittleEndian.Uint32(b[8:12])), 12
	default:
		return nil, fmt.Errorf("npy version %d", b[6])
	}
	if hlen < 0 || hlen > len(b)-start {
		return nil, fmt.Errorf("npy header past the end")
	}
	h := string(b[start : start+hlen])
	descr, ok := pyDictString(h, "descr")
	if !ok || strings.Contains(h, "'fortran_order': True") {
		return nil, fmt.Errorf("unsupported npy header %q", h)
	}
	shape, ok := pyDictShape(h)
	if !ok {
		return nil, fmt.Errorf("bad npy shape in %q", h)
	}
	data := b[start+hlen:]
	sum := sha256.Sum256(data)
	return map[string]any{"dtype": npyDType(descr), "shape": shape, "sha256": hex.EncodeToString(sum[:])}, nil
}

func pyDictString(h, key string) (string, bool) {
	i := strings.Index(h, "'"+key+"'")
	if i < 0 {
		return "", false
	}
	rest := strings.TrimLeft(h[i+len(key)+2:], ": ")
	if !strings.HasPrefix(rest, "'") {
		return "", false
	}
	j := strings.IndexByte(rest[1:], '\'')
	if j < 0 {
		return "", false
	}
	return rest[1 : 1+j], true
}

func pyDictShape(h string) ([]int, bool) {
	i := strings.Index(h, "'shape'")
	if i < 0 {
		return nil, false
	}
	rest := h[i:]
	a, b := strings.IndexByte(rest, '('), strings.IndexByte(rest, ')')
	if a < 0 || b < a {
		return nil, false
	}
	shape := []int{}
	for _, f := range strings.Split(rest[a+1:b], ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, false
		}
		shape = append(shape, n)
	}
	return shape, true
}

// npyDType names a numpy descr as str(dtype) does for native byte order.
func npyDType(descr string) string {
	names := map[string]string{
		"u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64",
		"i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
		"f2": "float16", "f4": "float32", "f8": "float64", "b1": "bool",
		"c8": "complex64", "c16": "complex128",
	}
	if len(descr) > 1 && (descr[0] == '<' || descr[0] == '|' || descr[0] == '=') {
		if n, ok := names[descr[1:]]; ok {
			return n
		}
	}
	return descr
}
