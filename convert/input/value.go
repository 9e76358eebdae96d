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
	Name     string
	Encoding string
}
