package agent

import (
	"testing"

	"github.com/sluicedata/sluice/format"
)

// TestSameSchemaFields checks the shortcut openDataset takes for a shard
// configured like the one before it: equal only when every field schemaOf
// reads is, never for JSON shards, and then schemaOf agrees.
func TestSameSchemaFields(t *testing.T) {
	base := format.ShardInfo{Format: "mds", ColumnNames: []string{"a", "b"}, ColumnEncodings: []string{"int", "str"}, ColumnSizes: []int{8, 0}}
	same := base
	same.ColumnNames = []string{"a", "b"}
	if !sameSchemaFields(&base, &same) || !sameSchema(schemaOf(&base), schemaOf(&same)) {
		t.Fatal("equal configurations not taken as equal")
	}
	for name, edit := range map[string]func(*format.ShardInfo){
		"names":     func(s *format.ShardInfo) { s.ColumnNames = []string{"a", "c"} },
		"encodings": func(s *format.ShardInfo) { s.ColumnEncodings = []string{"int", "bytes"} },
		"sizes":     func(s *format.ShardInfo) { s.ColumnSizes = []int{8, 4} },
		"format":    func(s *format.ShardInfo) { s.Format = "xsv" },
		"separator": func(s *format.ShardInfo) { s.Separator = "," },
	} {
		o := base
		edit(&o)
		if sameSchemaFields(&base, &o) {
			t.Errorf("%s differ: taken as equal", name)
		}
	}
	j := format.ShardInfo{Format: "json", Columns: map[string]string{"x": "int"}}
	j2 := format.ShardInfo{Format: "json", Columns: map[string]string{"y": "str"}}
	if sameSchemaFields(&j, &j2) {
		t.Error("JSON shards with different columns taken as equal")
	}
}
