package wds_test

import (
	"bytes"
	"fmt"

	"github.com/sluicedata/sluice/format/wds"
)

func Example() {
	var buf bytes.Buffer
	w := wds.NewWriter(&buf)
	_ = w.Write("train/0001", map[string][]byte{"jpg": []byte("...jpeg bytes..."), "cls": []byte("3")})
	_ = w.Write("train/0002", map[string][]byte{"jpg": []byte("...more bytes..."), "cls": []byte("5")})
	if err := w.Close(); err != nil {
		panic(err)
	}

	r := wds.NewReader(bytes.NewReader(buf.Bytes()), nil)
	for r.Next() {
		s := r.Sample()
		fmt.Println(s.Key, s.Order, string(s.Fields["cls"]))
	}
	if err := r.Err(); err != nil {
		panic(err)
	}
	// Output:
	// train/0001 [cls jpg] 3
	// train/0002 [cls jpg] 5
}
