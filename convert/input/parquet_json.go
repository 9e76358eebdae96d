package input

import (
	"encoding/base64"
	"math"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/sluicedata/sluice/format"
)

// jsonNode renders a nested Parquet field without repetition (a struct of
// scalars and structs) straight from the column values, without the
// library's per-row reconstruction.
type jsonNode struct {
	name     string
	leaf     int // index into the field's leaves; -1 for a group
	def      int // definition level at which the node is present
	str      bool
	children []jsonNode
}

// planJSON returns the render tree of c when no node under it repeats,
// or nil.
func planJSON(c *parquet.Column, def int, leafIdx *int) *jsonNode {
	if c.Repeated() {
		return nil
	}
	if c.Optional() {
		def++
	}
	n := &jsonNode{name: c.Name(), leaf: -1, def: def}
	if c.Leaf() {
		n.leaf = *leafIdx
		*leafIdx++
		n.str = isString(c)
		return n
	}
	for _, cc := range c.Columns() {
		child := planJSON(cc, def, leafIdx)
		if child == nil {
			return nil
		}
		n.children = append(n.children, *child)
	}
	return n
}

// firstLeaf returns the first leaf index under n.
func (n *jsonNode) firstLeaf() int {
	for n.leaf < 0 {
		n = &n.children[0]
	}
	return n.leaf
}

// appendJSON renders row r of node n; present is false for a null.
func (n *jsonNode) appendJSON(dst []byte, c *pqCol, r int) []byte {
	v := c.leafVals[n.firstLeaf()][r]
	if v.DefinitionLevel() < n.def {
		return append(dst, "null"...)
	}
	if n.leaf >= 0 {
		return appendScalarJSON(dst, v, n.str)
	}
	dst = append(dst, '{')
	for i := range n.children {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = format.AppendJSONStringUTF8(dst, n.children[i].name)
		dst = append(dst, ':')
		dst = n.children[i].appendJSON(dst, c, r)
	}
	return append(dst, '}')
}

// appendScalarJSON renders one present value as encoding/json renders the
// Go value the library reconstructs (strings as text, binary as base64).
func appendScalarJSON(dst []byte, v parquet.Value, str bool) []byte {
	switch v.Kind() {
	case parquet.Boolean:
		return strconv.AppendBool(dst, v.Boolean())
	case parquet.Int32:
		return strconv.AppendInt(dst, int64(v.Int32()), 10)
	case parquet.Int64:
		return strconv.AppendInt(dst, v.Int64(), 10)
	case parquet.Float:
		return appendJSONFloat(dst, float64(v.Float()), 32)
	case parquet.Double:
		return appendJSONFloat(dst, v.Double(), 64)
	case parquet.ByteArray, parquet.FixedLenByteArray:
		if str {
			return format.AppendJSONStringUTF8(dst, string(v.ByteArray()))
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.ByteArray())
		return append(dst, '"')
	}
	return append(dst, "null"...) // int96 and others: not representable
}

// appendJSONFloat formats like encoding/json; NaN and infinities, which
// JSON cannot hold, become null.
func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	abs := math.Abs(f)
	fmtc := byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		fmtc = 'e'
	}
	return strconv.AppendFloat(dst, f, fmtc, -1, bits)
}
