package shuffle_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluicedata/sluice/shuffle"
)

// FuzzShuffle builds parameters from arbitrary input and checks that New
// never panics, that valid parameters give a permutation, and that Fill of
// a sub-range agrees with the whole permutation.
func FuzzShuffle(f *testing.F) {
	f.Add(uint8(4), []byte{3, 5, 4, 2}, uint8(2), uint16(9176), uint8(0), uint16(8), uint16(3), uint16(5))
	f.Add(uint8(3), []byte{155, 155, 154, 155, 154, 154, 73}, uint8(8), uint16(9176), uint8(1), uint16(50), uint16(100), uint16(300))
	f.Add(uint8(5), []byte{0, 0, 9, 1}, uint8(3), uint16(1), uint8(2), uint16(2), uint16(0), uint16(10))
	algos := []string{"naive", "py1s", "py2s", "py1br", "py1e", "py1b", "", "bogus"}
	f.Fuzz(func(t *testing.T, algo uint8, sizes []byte, ncn uint8, seed uint16, epoch uint8, bs, lo, k uint16) {
		if len(sizes) > 64 {
			sizes = sizes[:64]
		}
		units := make([]int64, len(sizes))
		for i, z := range sizes {
			units[i] = int64(z)
		}
		p := shuffle.Params{Algo: algos[int(algo)%len(algos)], UnitSizes: units, NumCanonicalNodes: int(ncn % 20),
			Seed: int64(seed), Epoch: int64(epoch), BlockSize: int64(bs)}
		whole, err := shuffle.Get(p)
		if err != nil {
			if !errors.Is(err, shuffle.ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			return
		}
		sorted := slices.Clone(whole)
		slices.Sort(sorted)
		for i, v := range sorted {
			if v != int64(i) {
				t.Fatalf("%+v: not a permutation", p)
			}
		}
		s, err := shuffle.New(p)
		if err != nil {
			t.Fatal(err)
		}
		n := int64(len(whole))
		start := min(int64(lo), n)
		dst := make([]int64, min(int64(k), n-start))
		if err := s.Fill(dst, start); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(dst, whole[start:start+int64(len(dst))]) {
			t.Fatalf("%+v: Fill(%d, len %d) = %v, want %v", p, start, len(dst), dst, whole[start:start+int64(len(dst))])
		}
	})
}
