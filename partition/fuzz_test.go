package partition_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/partition"
)

// FuzzPartition compares the per-element partition with the literal array
// transcription (refGet) on arbitrary small parameters, errors included.
func FuzzPartition(f *testing.F) {
	f.Add(false, uint16(10), uint8(2), uint8(2), uint8(2), uint8(1), uint8(2), uint16(4), uint8(0))
	f.Add(true, uint16(12), uint8(2), uint8(3), uint8(1), uint8(1), uint8(2), uint16(0), uint8(2))
	f.Add(false, uint16(2), uint8(4), uint8(1), uint8(1), uint8(1), uint8(1), uint16(0), uint8(0))
	f.Fuzz(func(t *testing.T, relaxed bool, n uint16, c, p, r, w, b uint8, drop uint16, initial uint8) {
		q := partition.Params{Algo: "orig", NumSamples: int64(n % 600), NumCanonicalNodes: int(c % 17),
			NumPhysicalNodes: int(p % 9), RanksPerNode: int(r % 9), WorkersPerRank: int(w % 9),
			BatchSize: int(b % 9), DropFirst: int64(drop % 700), InitialPhysicalNodes: int(initial % 9)}
		if relaxed {
			q.Algo = "relaxed"
		}
		shape, got, err := partition.Get(q)
		valid := q.NumSamples > 0 && q.NumCanonicalNodes > 0 && q.NumPhysicalNodes > 0 &&
			q.RanksPerNode > 0 && q.WorkersPerRank > 0 && q.BatchSize > 0
		if !valid {
			if !errors.Is(err, partition.ErrInvalid) {
				t.Fatalf("%+v: err = %v, want ErrInvalid", q, err)
			}
			return
		}
		wantShape, want, wantErr := refGet(q)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%+v: err = %v, reference err = %v", q, err, wantErr)
		}
		if err != nil {
			if !errors.Is(err, partition.ErrInvalid) {
				t.Fatalf("%+v: error %v does not match ErrInvalid", q, err)
			}
			return
		}
		if shape.Dims() != wantShape || !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("%+v: got shape %v %v, want %v %v", q, shape.Dims(), got, wantShape, want)
		}
	})
}
