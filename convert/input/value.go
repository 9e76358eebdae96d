package input

import "strconv"

// Kind is the type of a Value.
type Kind uint8

// Value kinds. Text is untyped text (a CSV cell) whose type inference and
// encoders may parse; String is text known to be a string.
const (
	Null Kind = iota
	Bool
	Int
	Float
	String
	Text
	Bytes
	JSON // Bytes holds the value's JSON text (an object or array)
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "bool"
	case Int:
		return "int"
	case Float:
		return "float"
	case String:
		return "string"
	case Text:
		return "text"
	case Bytes:
		return "bytes"
	case JSON:
		return "json"
	case NDArray:
		return "ndarray"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one field of an input row. It is a plain struct, so rows of
// values need no per-field allocation. Bytes may alias the source's buffers
// and is valid only while the row's batch is.
type Value struct {
	// Kind says which of the fields below holds the value.
	Kind  Kind
	Int   int64   // Int, Bool (0 or 1)
	Float float64 // Float
	Bytes []byte  // String, Text, Bytes, JSON
}

// Column is one output column: a name and its MDS encoding.
type Column struct {
	Name     string `json:"name"`
	Encoding string `json:"encoding"`
}

// NDArray is the kind of a one-dimensional array of numbers (a Parquet
// list of numbers): Bytes holds the elements packed little-endian, Int the
// index of their dtype in DTypes.
const NDArray Kind = JSON + 1

// DTypes lists the element types of NDArray values, indexed by Value.Int.
var DTypes = []string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float16", "float32", "float64"}

// NDArrayValue returns an NDArray value of dtype (one of DTypes) over the
// packed little-endian data.
func NDArrayValue(dtype string, data []byte) Value {
	for i, d := range DTypes {
		if d == dtype {
			return Value{Kind: NDArray, Int: int64(i), Bytes: data}
		}
	}
	return Value{Kind: Bytes, Bytes: data}
}

// DType returns the element type of an NDArray value ("" for other kinds).
func (v *Value) DType() string {
	if v.Kind != NDArray || v.Int < 0 || v.Int >= int64(len(DTypes)) {
		return ""
	}
	return DTypes[v.Int]
}
