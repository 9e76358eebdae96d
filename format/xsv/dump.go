package xsv

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/sluicedata/sluice/format"
	"github.com/sluicedata/sluice/format/internal/split"
)

// AppendDump appends the canonical JSON line of sample j of shard s
// (global index i, shard index k), in the form of the reference fixtures'
// expected.jsonl that mds.AppendDump writes:
//
//	{"cols": {name: {"raw_len": n, "raw_sha256": hex, "v": value}}, "i": i, "shard": k}
//
// with keys sorted and strings as UTF-8 (Python's json.dumps(sort_keys=True,
// ensure_ascii=False)), without the newline. A column's raw bytes are its
// field's text in the line; values are JSON strings (str), JSON integers
// (int) and {"bits", "s"} objects (float).
func AppendDump(dst []byte, i int64, k int, s *Shard, j int) ([]byte, error) {
	rec, err := s.Record(j)
	if err != nil {
		return dst, err
	}
	sample := make(format.Sample, len(s.schema.names))
	if err := s.DecodeInto(j, sample); err != nil {
		return dst, err
	}
	// Field texts, in column order (DecodeInto has checked the line).
	sc := s.schema
	line := rec[:len(rec)-len(sc.nlB)]
	fields := make([][]byte, len(sc.names))
	for c := range sc.names {
		if c == len(sc.names)-1 {
			fields[c] = line
			break
		}
		n := bytes.Index(line, sc.sepB)
		fields[c], line = line[:n], line[n+len(sc.sepB):]
	}
	order := make([]int, len(sc.names))
	for c := range order {
		order[c] = c
	}
	slices.SortFunc(order, func(a, b int) int { return cmpString(sc.names[a], sc.names[b]) })
	dst = append(dst, `{"cols": {`...)
	for n, c := range order {
		if n > 0 {
			dst = append(dst, ", "...)
		}
		v := sample[sc.names[c]]
		dst, err = split.AppendDumpColumn(dst, sc.names[c], fields[c], func(b []byte) ([]byte, error) {
			switch v := v.(type) {
			case string:
				return format.AppendJSONStringUTF8(b, v), nil
			case int64:
				return strconv.AppendInt(b, v, 10), nil
			case float64:
				return split.AppendDumpFloat(b, v), nil
			}
			return format.AppendJSONUTF8(b, v, true) // *big.Int
		})
		if err != nil {
			return dst, err
		}
	}
	return split.AppendDumpTail(dst, i, k), nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
