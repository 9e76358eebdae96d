package jsonl

import (
	"slices"
	"strconv"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/internal/split"
)

// AppendDump appends the canonical JSON line of sample j of shard s
// (global index i, shard index k), in the form of the reference fixtures'
// expected.jsonl that mds.AppendDump writes:
//
//	{"cols": {key: {"raw_len": n, "raw_sha256": hex, "v": value}}, "i": i, "shard": k}
//
// with keys sorted and strings as UTF-8 (Python's json.dumps(sort_keys=True,
// ensure_ascii=False)), without the newline. Every key of the record's
// object is a column, as MosaicML returns the whole object. A column's raw
// bytes are its value's JSON text as MosaicML's writer spells it
// (json.dumps with ASCII escaping; for records Sluice or MosaicML wrote,
// exactly the bytes in the file). Values are JSON strings, integers,
// booleans and null, {"bits", "s"} objects for floats, and {"json": value}
// for arrays and objects.
func AppendDump(dst []byte, i int64, k int, s *Shard, j int) ([]byte, error) {
	sample, err := s.Sample(j)
	if err != nil {
		return dst, err
	}
	keys := make([]string, 0, len(sample))
	for key := range sample {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	var raw []byte
	dst = append(dst, `{"cols": {`...)
	for n, key := range keys {
		if n > 0 {
			dst = append(dst, ", "...)
		}
		v := sample[key]
		if f, ok := v.(float64); ok {
			raw = format.AppendJSONFloat(raw[:0], f)
		} else if raw, err = format.AppendJSON(raw[:0], v, true); err != nil {
			return dst, err
		}
		dst, err = split.AppendDumpColumn(dst, key, raw, func(b []byte) ([]byte, error) {
			switch v := v.(type) {
			case string:
				return format.AppendJSONStringUTF8(b, v), nil
			case int64:
				return strconv.AppendInt(b, v, 10), nil
			case float64:
				return split.AppendDumpFloat(b, v), nil
			case []any, *format.JSONObject:
				b = append(b, `{"json": `...)
				b, err := format.AppendJSONUTF8(b, v, true)
				return append(b, '}'), err
			}
			return format.AppendJSONUTF8(b, v, true) // bool, nil, *big.Int
		})
		if err != nil {
			return dst, err
		}
	}
	return split.AppendDumpTail(dst, i, k), nil
}
