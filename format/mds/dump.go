package mds

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/sluicedata/sluice/format"
)

// AppendDump appends the canonical JSON line of sample j of shard s (global
// index i, shard index k), the form of the reference fixtures'
// expected.jsonl:
//
//	{"cols": {name: {"raw_len": n, "raw_sha256": hex, "v": value}}, "i": i, "shard": k}
//
// in Python's json.dumps(sort_keys=True, ensure_ascii=False) text, without
// the newline. Values
// follow the fixtures README: bytes as {"b64"}, floats as {"bits", "s"},
// json as {"json": value}, ndarrays as {"data", "data_b64", "dtype",
// "shape"}, images as {"format", "height", "mode", "pixels_len",
// ["pixels_mean",] "pixels_sha256", "width"}. pkl values, which Sluice
// never unpickles, are written as {"pkl_b64": base64 of the pickle}.
func AppendDump(dst []byte, i int64, k int, s *Shard, j int) ([]byte, error) {
	rec, err := s.Record(j)
	if err != nil {
		return dst, err
	}
	var buf [16][]byte
	cols, err := s.Columns(j, rec, buf[:0])
	if err != nil {
		return dst, err
	}
	// Column names are sorted in the index, but sort defensively: the
	// canonical form needs sorted keys.
	order := sortedOrder(s.names)
	dst = append(dst, `{"cols": {`...)
	for n, c := range order {
		if n > 0 {
			dst = append(dst, ", "...)
		}
		b := cols[c]
		dst = format.AppendJSONStringUTF8(dst, s.names[c])
		dst = append(dst, `: {"raw_len": `...)
		dst = strconv.AppendInt(dst, int64(len(b)), 10)
		sum := sha256.Sum256(b)
		dst = append(dst, `, "raw_sha256": "`...)
		dst = hex.AppendEncode(dst, sum[:])
		dst = append(dst, `", "v": `...)
		v, err := s.cols[c].Decode(b)
		if err != nil {
			return dst, &format.CorruptError{File: s.file, Shard: s.id, Sample: j, Offset: -1, Reason: fmt.Sprintf("column %q", s.names[c]), Err: err}
		}
		if dst, err = appendDumpValue(dst, v); err != nil {
			return dst, fmt.Errorf("mds: sample %d column %q: %w", i, s.names[c], err)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `}, "i": `...)
	dst = strconv.AppendInt(dst, i, 10)
	dst = append(dst, `, "shard": `...)
	dst = strconv.AppendInt(dst, int64(k), 10)
	return append(dst, '}'), nil
}

func sortedOrder(names []string) []int {
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	for i := 1; i < len(order); i++ { // insertion sort: few columns, usually sorted
		for j := i; j > 0 && names[order[j]] < names[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	return order
}

func appendFloatDump(dst []byte, x float64, bits uint64, width, bitSize int) []byte {
	dst = append(dst, `{"bits": "`...)
	h := strconv.FormatUint(bits, 16)
	for n := len(h); n < width/4; n++ {
		dst = append(dst, '0')
	}
	dst = append(dst, h...)
	dst = append(dst, `", "s": "`...)
	dst = format.AppendPyFloat(dst, x, bitSize)
	return append(dst, `"}`...)
}

func appendDumpValue(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case []byte:
		dst = append(dst, `{"b64": "`...)
		dst = base64.StdEncoding.AppendEncode(dst, v)
		return append(dst, `"}`...), nil
	case string:
		return format.AppendJSONStringUTF8(dst, v), nil
	case format.Decimal:
		return format.AppendJSONStringUTF8(dst, string(v)), nil
	case format.Float16:
		dst = append(dst, `{"bits": "`...)
		dst = fmt.Appendf(dst, "%04x", uint16(v))
		dst = append(dst, `", "s": "`...)
		dst = append(dst, format.FormatFloat16(v)...)
		return append(dst, `"}`...), nil
	case float32:
		return appendFloatDump(dst, float64(v), uint64(math.Float32bits(v)), 32, 32), nil
	case float64:
		return appendFloatDump(dst, v, math.Float64bits(v), 64, 64), nil
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, *big.Int:
		return format.AppendJSON(dst, v, true)
	case format.JSON:
		dst = append(dst, `{"json": `...)
		dst, err := format.AppendJSONUTF8(dst, v, true)
		if err != nil {
			return dst, err
		}
		return append(dst, '}'), nil
	case format.Pickle:
		dst = append(dst, `{"pkl_b64": "`...)
		dst = base64.StdEncoding.AppendEncode(dst, v)
		return append(dst, `"}`...), nil
	case *format.NDArray:
		return appendNDArrayDump(dst, v), nil
	case *format.Image:
		return appendImageDump(dst, v), nil
	case []*format.Image:
		dst = append(dst, '[')
		for i, im := range v {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = appendImageDump(dst, im)
		}
		return append(dst, ']'), nil
	}
	return dst, fmt.Errorf("cannot dump %T", v)
}

func appendNDArrayDump(dst []byte, a *format.NDArray) []byte {
	dst = append(dst, `{"data": [`...)
	le := binary.LittleEndian
	for i := 0; i < a.Len(); i++ {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		switch a.DType {
		case "uint64":
			dst = strconv.AppendUint(dst, le.Uint64(a.Data[8*i:]), 10)
		case "int64":
			dst = strconv.AppendInt(dst, int64(le.Uint64(a.Data[8*i:])), 10)
		case "float16", "float32", "float64":
			x := a.Float64(i)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				dst = append(dst, '"')
				dst = format.AppendPyFloat(dst, x, 64)
				dst = append(dst, '"')
			} else {
				dst = format.AppendPyFloat(dst, x, 64)
			}
		default:
			dst = strconv.AppendInt(dst, int64(a.Float64(i)), 10)
		}
	}
	dst = append(dst, `], "data_b64": "`...)
	dst = base64.StdEncoding.AppendEncode(dst, a.Data)
	dst = append(dst, `", "dtype": "`...)
	dst = append(dst, a.DType...)
	dst = append(dst, `", "shape": [`...)
	for i, d := range a.Shape {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = strconv.AppendInt(dst, int64(d), 10)
	}
	return append(dst, "]}"...)
}

func appendImageDump(dst []byte, im *format.Image) []byte {
	dst = append(dst, `{"format": `...)
	if im.Format == "" {
		dst = append(dst, "null"...)
	} else {
		dst = format.AppendJSONString(dst, im.Format)
	}
	dst = append(dst, `, "height": `...)
	dst = strconv.AppendInt(dst, int64(im.Height), 10)
	dst = append(dst, `, "mode": `...)
	dst = format.AppendJSONString(dst, im.Mode)
	dst = append(dst, `, "pixels_len": `...)
	dst = strconv.AppendInt(dst, int64(len(im.Pix)), 10)
	if im.Format == "JPEG" {
		dst = append(dst, `, "pixels_mean": [`...)
		for i, m := range pixelMeans(im) {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = format.AppendPyFloat(dst, math.Round(m*1e4)/1e4, 64)
		}
		dst = append(dst, ']')
	}
	sum := sha256.Sum256(im.Pix)
	dst = append(dst, `, "pixels_sha256": "`...)
	dst = hex.AppendEncode(dst, sum[:])
	dst = append(dst, `", "width": `...)
	dst = strconv.AppendInt(dst, int64(im.Width), 10)
	return append(dst, '}')
}

// pixelMeans returns the mean of each band of an 8-bit-per-band image.
func pixelMeans(im *format.Image) []float64 {
	bands := map[string]int{"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "CMYK": 4}[im.Mode]
	if bands == 0 || len(im.Pix) == 0 {
		return nil
	}
	sums := make([]float64, bands)
	for i, p := range im.Pix {
		sums[i%bands] += float64(p)
	}
	n := float64(len(im.Pix) / bands)
	for i := range sums {
		sums[i] /= n
	}
	return sums
}
