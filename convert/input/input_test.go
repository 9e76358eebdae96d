package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExpandBraces(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"a.tar", []string{"a.tar"}},
		{"s-{00..02}.tar", []string{"s-00.tar", "s-01.tar", "s-02.tar"}},
		{"s-{8..10}", []string{"s-8", "s-9", "s-10"}},
		{"{a,b}/{0..1}", []string{"a/0", "a/1", "b/0", "b/1"}},
		{"https://h/x/shard-{000000..000001}.tar", []string{"https://h/x/shard-000000.tar", "https://h/x/shard-000001.tar"}},
	} {
		got, err := ExpandBraces(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", c.in, diff)
		}
	}
	for _, bad := range []string{"a{", "a}", "{3..1}", "{x}", "{a..b}", "{0..99999999999}"} {
		if _, err := ExpandBraces(bad); err == nil {
			t.Errorf("ExpandBraces(%q) succeeded", bad)
		}
	}
}

type field struct {
	Name string
	V    Value
}

func decodeAll(b []byte) ([]field, error) {
	var out []field
	err := DecodeObject(b, func(name []byte, v Value) error {
		v.Bytes = append([]byte(nil), v.Bytes...)
		out = append(out, field{string(name), v})
		return nil
	})
	return out, err
}

func TestDecodeObject(t *testing.T) {
	got, err := decodeAll([]byte(` {"a": 1, "b\u00e9": "x\ny\"\u00e9\ud83d\ude00", "c": -2.5e3, "d": [1, {"e": null}], "f": true, "g": null, "h": 12345678901234567890} `))
	if err != nil {
		t.Fatal(err)
	}
	want := []field{
		{"a", Value{Kind: Int, Int: 1}},
		{"bé", Value{Kind: String, Bytes: []byte("x\ny\"é😀")}},
		{"c", Value{Kind: Float, Float: -2500}},
		{"d", Value{Kind: JSON, Bytes: []byte(`[1, {"e": null}]`)}},
		{"f", Value{Kind: Bool, Int: 1}},
		{"g", Value{Kind: Null}},
		{"h", Value{Kind: Float, Float: 12345678901234567890}},
	}
	for i := range got {
		if got[i].V.Bytes != nil && len(got[i].V.Bytes) == 0 {
			got[i].V.Bytes = nil
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":01}`, `{"a":"\x01"}`, `{"a":1} x`, `{"a":tru}`, `{"a":"\q"}`, `{"a":[1,]}`, "{\"a\":\"\xff\"}"} {
		if _, err := decodeAll([]byte(bad)); !errors.Is(err, ErrSyntax) {
			t.Errorf("DecodeObject(%q) = %v, want ErrSyntax", bad, err)
		}
	}
}

// FuzzDecodeObject compares DecodeObject with encoding/json: both must
// accept the same objects (of valid UTF-8) and agree on every value.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, `{"a": "x\u00e9", "b": [1, 2, {"c": null}]}`, `{"n": -0.5e-3, "t": true}`, `{}`, `{"a":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeAll(b)
		var ref map[string]json.RawMessage
		refErr := json.Unmarshal(b, &ref)
		if err != nil {
			return // stricter than encoding/json is allowed (invalid UTF-8, depth)
		}
		if refErr != nil {
			t.Fatalf("DecodeObject accepted %q, encoding/json: %v", b, refErr)
		}
		last := map[string]Value{}
		for _, f := range got {
			last[f.Name] = f.V
		}
		if len(last) != len(ref) {
			t.Fatalf("%q: %d names, encoding/json %d", b, len(last), len(ref))
		}
		for name, v := range last {
			raw, ok := ref[name]
			if !ok {
				t.Fatalf("%q: name %q unknown to encoding/json", b, name)
			}
			var x any
			if err := json.Unmarshal(raw, &x); err != nil {
				t.Fatal(err)
			}
			switch v.Kind {
			case String:
				if s, ok := x.(string); !ok || (s != string(v.Bytes) && !bytes.ContainsRune([]byte(s), '\uFFFD')) {
					t.Fatalf("%q: %q = %q, encoding/json %q", b, name, v.Bytes, x)
				}
			case Int:
				if n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64); err != nil || n != v.Int {
					t.Fatalf("%q: %q = %d, encoding/json %s", b, name, v.Int, raw)
				}
			case Float:
				if fx, ok := x.(float64); ok && fx != v.Float {
					t.Fatalf("%q: %q = %v, encoding/json %v", b, name, v.Float, fx)
				}
			case JSON:
				var y any
				if err := json.Unmarshal(v.Bytes, &y); err != nil || !cmp.Equal(x, y) {
					t.Fatalf("%q: %q = %s, encoding/json %s", b, name, v.Bytes, raw)
				}
			case Bool:
				if bx, ok := x.(bool); !ok || bx != (v.Int == 1) {
					t.Fatalf("%q: %q bool mismatch", b, name)
				}
			case Null:
				if x != nil {
					t.Fatalf("%q: %q null mismatch", b, name)
				}
			}
		}
	})
}

func BenchmarkDecodeObject(b *testing.B) {
	line := []byte(`{"id": 123456, "text": "record number 123456 with some words in it", "score": 56.5, "tags": ["a", 3]}`)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if err := DecodeObject(line, func(name []byte, v Value) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
