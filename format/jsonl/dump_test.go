package jsonl_test

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/sluicedata/sluice/format/jsonl"
)

func TestAppendDump(t *testing.T) {
	rec := `{"a": [1, {"b": null}], "f": -0.0, "n": null, "s": "\u00e9", "t": true, "x": 12345678901234567890123}` + "\n"
	const cfg = `{"columns": {"s": "str"}, "compression": null, "format": "json", "hashes": [], "newline": "\n", "size_limit": null, "version": 2}`
	sh, err := jsonl.OpenBytes([]byte(rec), meta([]uint32{0, uint32(len(rec))}, cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := jsonl.AppendDump(nil, 0, 1, sh, 0)
	if err != nil {
		t.Fatal(err)
	}
	col := func(raw, v string) string {
		return fmt.Sprintf(`{"raw_len": %d, "raw_sha256": "%x", "v": %s}`, len(raw), sha256.Sum256([]byte(raw)), v)
	}
	want := `{"cols": {"a": ` + col(`[1, {"b": null}]`, `{"json": [1, {"b": null}]}`) +
		`, "f": ` + col(`-0.0`, `{"bits": "8000000000000000", "s": "-0.0"}`) +
		`, "n": ` + col(`null`, `null`) +
		`, "s": ` + col(`"\u00e9"`, `"é"`) +
		`, "t": ` + col(`true`, `true`) +
		`, "x": ` + col(`12345678901234567890123`, `12345678901234567890123`) +
		`}, "i": 0, "shard": 1}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
