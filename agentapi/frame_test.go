package agentapi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFrameRoundTrip(t *testing.T) {
	body := []byte{1, 2, 3, 4}
	b, err := AppendFrame(nil, Next{Op: OpNext, Iter: 3, Max: 7}, body)
	if err != nil {
		t.Fatal(err)
	}
	f, n, err := ParseFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(b) {
		t.Errorf("consumed %d of %d bytes", n, len(b))
	}
	if op, _ := f.Op(); op != OpNext {
		t.Errorf("op = %q", op)
	}
	if !bytes.Equal(f.Body, body) {
		t.Errorf("body = %v", f.Body)
	}
	g, _, err := ReadFrame(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(f.Header), string(g.Header)); diff != "" {
		t.Errorf("ReadFrame header differs: %s", diff)
	}
}

func TestParseFrameRejects(t *testing.T) {
	le := func(a, b uint32) []byte {
		return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, a), b)
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"short", []byte{1, 2, 3}, io.ErrUnexpectedEOF},
		{"frame length below header field", le(3, 0), ErrFrame},
		{"frame too large", le(MaxFrame+1, 2), ErrFrame},
		{"header too large", le(MaxHeader+10, MaxHeader+1), ErrFrame},
		{"header past frame", le(6, 5), ErrFrame},
		{"header too small", append(le(5, 1), '{'), ErrFrame},
		{"truncated", append(le(100, 2), '{', '}'), io.ErrUnexpectedEOF},
		{"not an object", append(le(6, 2), '[', ']'), ErrFrame},
		{"invalid json", append(le(6, 2), '{', '{'), ErrFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParseFrame(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			_, _, err = ReadFrame(bytes.NewReader(tt.in), nil)
			if err == nil {
				t.Fatal("ReadFrame accepted it")
			}
		})
	}
}

func TestParseEntries(t *testing.T) {
	b := Batch{N: 2, Shards: []BatchShard{{Shard: 4, Path: "/x", Size: 100}}}
	body := AppendEntry(nil, Entry{Sample: 9, Ref: 0, Length: 10, Offset: 90})
	body = AppendEntry(body, Entry{Sample: 10, Ref: InlineFlag, Length: 3, Offset: 0})
	body = append(body, 'a', 'b', 'c')
	es, inline, err := ParseEntries(b, body)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{9, 0, 10, 90}, {10, InlineFlag, 3, 0}}
	if diff := cmp.Diff(want, es); diff != "" {
		t.Error(diff)
	}
	if string(inline) != "abc" {
		t.Errorf("inline = %q", inline)
	}
	for name, e := range map[string]Entry{
		"past shard end": {Sample: 1, Ref: 0, Length: 11, Offset: 90},
		"unknown ref":    {Sample: 1, Ref: 1, Length: 1},
		"past inline":    {Sample: 1, Ref: InlineFlag, Length: 4},
		"offset wraps":   {Sample: 1, Ref: 0, Length: 2, Offset: ^uint64(0)},
	} {
		t.Run(name, func(t *testing.T) {
			b := Batch{N: 1, Shards: b.Shards}
			body := append(AppendEntry(nil, e), 'a', 'b', 'c')
			if _, _, err := ParseEntries(b, body); !errors.Is(err, ErrFrame) {
				t.Fatalf("err = %v, want ErrFrame", err)
			}
		})
	}
	if _, _, err := ParseEntries(Batch{N: 5}, body); !errors.Is(err, ErrFrame) {
		t.Fatalf("count past body: err = %v", err)
	}
}

func TestErrorIs(t *testing.T) {
	var err error = &Error{Code: CodeNotFound, Message: "x"}
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
		t.Fatal("Error.Is does not follow its code")
	}
	if !errors.Is(&Error{Code: "weird"}, ErrInternal) {
		t.Fatal("unknown code should match ErrInternal")
	}
}

// FuzzFrame feeds arbitrary bytes to the frame and batch decoders. They
// must never panic, never allocate beyond the input, and what they accept
// must re-encode to the same frame.
func FuzzFrame(f *testing.F) {
	seed, _ := AppendFrame(nil, Hello{Op: OpHello, Version: 1}, nil)
	f.Add(seed)
	body := AppendEntry(nil, Entry{Sample: 1, Ref: 0, Length: 4, Offset: 0})
	seed, _ = AppendFrame(nil, Batch{Op: OpBatch, N: 1, Shards: []BatchShard{{Path: "/a", Size: 8}}}, body)
	f.Add(seed)
	f.Add([]byte{8, 0, 0, 0, 2, 0, 0, 0, '{', '}', 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		fr, n, err := ParseFrame(in)
		if err != nil {
			if _, _, rerr := ReadFrame(bytes.NewReader(in), nil); rerr == nil {
				t.Fatalf("ReadFrame accepted what ParseFrame rejected: %v", err)
			}
			return
		}
		g, _, err := ReadFrame(bytes.NewReader(in), nil)
		if err != nil {
			t.Fatalf("ReadFrame rejected what ParseFrame accepted: %v", err)
		}
		if !bytes.Equal(g.Header, fr.Header) || !bytes.Equal(g.Body, fr.Body) {
			t.Fatal("decoders disagree")
		}
		re, err := appendRawFrame(nil, fr.Header, fr.Body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(re, in[:n]) {
			t.Fatal("re-encoding differs")
		}
		fr.Op()
		var b Batch
		if json := fr.Header; len(json) > 0 {
			if err := decodeReply(fr, OpBatch, &b); err == nil {
				ParseEntries(b, fr.Body)
			}
		}
	})
}
