package mds

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluicedata/sluice/format"
)

// dtypeCodes maps ndarray dtypes to their MDS value-dtype codes.
var dtypeCodes = map[string]byte{
	"uint8": 8, "int8": 9, "uint16": 16, "int16": 17, "float16": 18,
	"uint32": 32, "int32": 33, "float32": 34, "uint64": 64, "int64": 65, "float64": 66,
}

var codeDTypes = func() map[byte]string {
	m := make(map[byte]string, len(dtypeCodes))
	for k, v := range dtypeCodes {
		m[v] = k
	}
	return m
}()

func (e *Encoding) decodeNDArray(b []byte) (*format.NDArray, error) {
	a := &format.NDArray{DType: e.dtype}
	if a.DType == "" {
		if len(b) < 1 {
			return nil, errors.New("ndarray value is empty")
		}
		dt, ok := codeDTypes[b[0]]
		if !ok {
			return nil, fmt.Errorf("ndarray value has unknown dtype code %d", b[0])
		}
		a.DType = dt
		b = b[1:]
	}
	item := format.DTypeSize(a.DType)
	if e.shape != nil {
		a.Shape = append([]int(nil), e.shape...)
	} else {
		if len(b) < 1 {
			return nil, errors.New("ndarray value has no shape")
		}
		ndim := int(b[0] >> 2)
		dimSize := 1 << (b[0] & 3)
		b = b[1:]
		if ndim == 0 {
			return nil, errors.New("ndarray value has 0 dimensions")
		}
		if len(b) < ndim*dimSize {
			return nil, fmt.Errorf("ndarray value truncated in its shape (%d dims)", ndim)
		}
		a.Shape = make([]int, ndim)
		elems := uint64(1)
		for i := range a.Shape {
			var d uint64
			switch dimSize {
			case 1:
				d = uint64(b[i])
			case 2:
				d = uint64(binary.LittleEndian.Uint16(b[2*i:]))
			case 4:
				d = uint64(binary.LittleEndian.Uint32(b[4*i:]))
			case 8:
				d = binary.LittleEndian.Uint64(b[8*i:])
			}
			if d == 0 || d > uint64(len(b)) {
				return nil, fmt.Errorf("ndarray dimension %d is %d", i, d)
			}
			elems *= d
			if elems > uint64(len(b)) {
				return nil, errors.New("ndarray shape exceeds its data")
			}
			a.Shape[i] = int(d)
		}
		b = b[ndim*dimSize:]
	}
	elems := 1
	for _, d := range a.Shape {
		elems *= d
	}
	if len(b)%item != 0 {
		return nil, fmt.Errorf("ndarray data of %d bytes is not a multiple of %s", len(b), a.DType)
	}
	// numpy reshapes the values to the shape; a count mismatch fails there.
	if len(b)/item != elems {
		return nil, fmt.Errorf("ndarray has %d values for shape %v", len(b)/item, a.Shape)
	}
	a.Data = append([]byte{}, b...)
	return a, nil
}

func (e *Encoding) appendNDArray(dst []byte, a *format.NDArray) ([]byte, error) {
	item := format.DTypeSize(a.DType)
	if item == 0 {
		return nil, fmt.Errorf("unsupported ndarray dtype %q", a.DType)
	}
	if len(a.Shape) == 0 {
		return nil, errors.New("0-dimensional ndarray: use a scalar encoding")
	}
	if len(a.Shape) > 63 {
		return nil, errors.New("ndarray has more than 63 dimensions")
	}
	elems, maxDim := 1, 0
	for _, d := range a.Shape {
		if d < 1 {
			return nil, fmt.Errorf("ndarray shape %v has an empty dimension", a.Shape)
		}
		if elems > len(a.Data)/d+1 {
			return nil, fmt.Errorf("ndarray shape %v does not match its %d data bytes", a.Shape, len(a.Data))
		}
		elems *= d
		maxDim = max(maxDim, d)
	}
	if elems*item != len(a.Data) {
		return nil, fmt.Errorf("ndarray shape %v needs %d bytes of %s, got %d", a.Shape, elems*item, a.DType, len(a.Data))
	}
	if e.dtype != "" && e.dtype != a.DType {
		return nil, fmt.Errorf("ndarray dtype %s, encoding wants %s", a.DType, e.dtype)
	}
	if e.shape != nil {
		if len(e.shape) != len(a.Shape) {
			return nil, fmt.Errorf("ndarray shape %v, encoding wants %v", a.Shape, e.shape)
		}
		for i := range e.shape {
			if e.shape[i] != a.Shape[i] {
				return nil, fmt.Errorf("ndarray shape %v, encoding wants %v", a.Shape, e.shape)
			}
		}
	}
	if e.dtype == "" {
		dst = append(dst, dtypeCodes[a.DType])
	}
	if e.shape == nil {
		var code byte
		switch {
		case maxDim < 1<<8:
			code = 0
		case maxDim < 1<<16:
			code = 1
		case uint64(maxDim) < 1<<32:
			code = 2
		default:
			code = 3
		}
		dst = append(dst, byte(len(a.Shape))<<2|code)
		for _, d := range a.Shape {
			switch code {
			case 0:
				dst = append(dst, byte(d))
			case 1:
				dst = binary.LittleEndian.AppendUint16(dst, uint16(d))
			case 2:
				dst = binary.LittleEndian.AppendUint32(dst, uint32(d))
			default:
				dst = binary.LittleEndian.AppendUint64(dst, uint64(d))
			}
		}
	}
	return append(dst, a.Data...), nil
}
