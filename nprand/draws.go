package nprand

import (
	"fmt"
	"math/bits"
)

// Bounded returns a value in [0, rng] with Lemire's method without masking
// (numpy random_bounded_uint64), the primitive of Integers and Choice.
func (g *Generator) Bounded(rng uint64) uint64 {
	switch {
	case rng == 0:
		return 0
	case rng < 0xffffffff:
		excl := uint32(rng) + 1
		m := uint64(g.Uint32()) * uint64(excl)
		left := uint32(m)
		if left < excl {
			t := (0xffffffff - uint32(rng)) % excl
			for left < t {
				m = uint64(g.Uint32()) * uint64(excl)
				left = uint32(m)
			}
		}
		return m >> 32
	case rng == 0xffffffff:
		return uint64(g.Uint32())
	case rng == ^uint64(0):
		return g.Uint64()
	default:
		excl := rng + 1
		hi, lo := bits.Mul64(g.Uint64(), excl)
		if lo < excl {
			t := (^uint64(0) - rng) % excl
			for lo < t {
				hi, lo = bits.Mul64(g.Uint64(), excl)
			}
		}
		return hi
	}
}

// Integer returns one value of numpy's rng.integers(lo, hi) (int64 dtype,
// hi exclusive).
func (g *Generator) Integer(lo, hi int64) (int64, error) {
	if hi <= lo {
		return 0, fmt.Errorf("%w: integers: high %d <= low %d", ErrInvalidArgument, hi, lo)
	}
	return lo + int64(g.Bounded(uint64(hi-1-lo))), nil
}

// Integers returns numpy's rng.integers(lo, hi, size=k) (int64 dtype, hi
// exclusive), drawing the values in order.
func (g *Generator) Integers(lo, hi int64, k int) ([]int64, error) {
	if hi <= lo {
		return nil, fmt.Errorf("%w: integers: high %d <= low %d", ErrInvalidArgument, hi, lo)
	}
	if k < 0 {
		return nil, fmt.Errorf("%w: integers: negative size %d", ErrInvalidArgument, k)
	}
	rng := uint64(hi - 1 - lo)
	out := make([]int64, k)
	for i := range out {
		out[i] = lo + int64(g.Bounded(rng))
	}
	return out, nil
}

// Uniform returns one value of numpy's rng.uniform(lo, hi).
func (g *Generator) Uniform(lo, hi float64) float64 {
	r := hi - lo
	// float64(...) forbids fusing into an FMA, which would round differently
	// from numpy on x86-64.
	return lo + float64(r*g.Float64())
}

// Uniforms returns numpy's rng.uniform(lo, hi, size=k).
func (g *Generator) Uniforms(lo, hi float64, k int) ([]float64, error) {
	r := hi - lo
	if r-r != 0 { // NaN or ±Inf
		return nil, fmt.Errorf("%w: uniform: range %v is not finite", ErrInvalidArgument, r)
	}
	if k < 0 {
		return nil, fmt.Errorf("%w: uniform: negative size %d", ErrInvalidArgument, k)
	}
	out := make([]float64, k)
	for i := range out {
		out[i] = lo + float64(r*g.Float64())
	}
	return out, nil
}

// Choice returns numpy's rng.choice(n, k, replace=False) with the default
// shuffle=True and no probabilities (spec A.5): k distinct values from
// [0, n) in numpy's exact order.
func (g *Generator) Choice(n, k int) ([]int64, error) {
	return g.choice(n, k, 1<<24)
}

// choice is Choice with the population size up to which the tail regime
// uses a dense array (larger ones are tracked sparsely).
func (g *Generator) choice(n, k, denseLimit int) ([]int64, error) {
	if n < 0 || k < 0 {
		return nil, fmt.Errorf("%w: choice: negative population %d or size %d", ErrInvalidArgument, n, k)
	}
	if k > n {
		return nil, fmt.Errorf("%w: choice: cannot take a larger sample (%d) than population (%d) without replacement", ErrInvalidArgument, k, n)
	}
	if k == 0 {
		return []int64{}, nil
	}
	if n > 10000 && k > n/50 {
		// Tail shuffle: the last k positions of a partial Fisher-Yates over
		// [0, n). Only positions that were swapped differ from the identity,
		// so a large population is tracked sparsely, in O(k) memory.
		stop := max(n-k, 1)
		if n <= denseLimit {
			a := make([]int64, n)
			for i := range a {
				a[i] = int64(i)
			}
			for i := n - 1; i >= stop; i-- {
				j := g.Bounded(uint64(i))
				a[i], a[j] = a[j], a[i]
			}
			out := make([]int64, k)
			copy(out, a[n-k:])
			return out, nil
		}
		moved := make(map[int64]int64, 2*k)
		get := func(i int64) int64 {
			if v, ok := moved[i]; ok {
				return v
			}
			return i
		}
		for i := int64(n - 1); i >= int64(stop); i-- {
			j := int64(g.Bounded(uint64(i)))
			vi, vj := get(i), get(j)
			moved[i], moved[j] = vj, vi
		}
		out := make([]int64, k)
		for i := range out {
			out[i] = get(int64(n - k + i))
		}
		return out, nil
	}
	// Floyd's algorithm, then a Lemire-based shuffle of the result.
	out := make([]int64, 0, k)
	seen := make(map[int64]struct{}, k)
	for j := n - k; j < n; j++ {
		v := int64(g.Bounded(uint64(j)))
		if _, dup := seen[v]; dup {
			v = int64(j)
		}
		seen[v] = struct{}{}
		out = append(out, v)
	}
	for i := k - 1; i > 0; i-- {
		t := g.Bounded(uint64(i))
		out[i], out[t] = out[t], out[i]
	}
	return out, nil
}

// FillFloat64 writes the next len(dst) Float64 draws into dst, exactly as
// that many calls of Float64 would, and leaves g after them. It runs four
// interleaved lanes of the LCG (each advancing four steps at a time), so
// the 128-bit multiply chains overlap instead of running one after the
// other: several times the throughput of a Float64 loop.
func (g *Generator) FillFloat64(dst []float64) {
	const scale = 1.0 / 9007199254740992.0
	if len(dst) < 8 {
		for i := range dst {
			dst[i] = g.Float64()
		}
		return
	}
	// Lanes hold states k+1 … k+4; each advances by x -> M⁴x + c4.
	m2 := mul128(pcgMult, pcgMult)
	c2 := mul128(add128(pcgMult, u128{0, 1}), g.inc)
	m4 := mul128(m2, m2)
	c4 := add128(mul128(c2, m2), c2)
	s0 := add128(mul128(g.state, pcgMult), g.inc)
	s1 := add128(mul128(s0, pcgMult), g.inc)
	s2 := add128(mul128(s1, pcgMult), g.inc)
	s3 := add128(mul128(s2, pcgMult), g.inc)
	ah, al, bh, bl := s0.hi, s0.lo, s1.hi, s1.lo
	ch, cl, dh, dl := s2.hi, s2.lo, s3.hi, s3.lo
	n := len(dst) &^ 3
	for i := 0; i < n; i += 4 {
		d := dst[i : i+4 : i+4]
		d[0] = float64(int64(bits.RotateLeft64(ah^al, -int(ah>>58))>>11)) * scale
		d[1] = float64(int64(bits.RotateLeft64(bh^bl, -int(bh>>58))>>11)) * scale
		d[2] = float64(int64(bits.RotateLeft64(ch^cl, -int(ch>>58))>>11)) * scale
		d[3] = float64(int64(bits.RotateLeft64(dh^dl, -int(dh>>58))>>11)) * scale
		if i+4 == n {
			break
		}
		var c uint64
		hi, lo := bits.Mul64(al, m4.lo)
		hi += ah*m4.lo + al*m4.hi
		al, c = bits.Add64(lo, c4.lo, 0)
		ah, _ = bits.Add64(hi, c4.hi, c)
		hi, lo = bits.Mul64(bl, m4.lo)
		hi += bh*m4.lo + bl*m4.hi
		bl, c = bits.Add64(lo, c4.lo, 0)
		bh, _ = bits.Add64(hi, c4.hi, c)
		hi, lo = bits.Mul64(cl, m4.lo)
		hi += ch*m4.lo + cl*m4.hi
		cl, c = bits.Add64(lo, c4.lo, 0)
		ch, _ = bits.Add64(hi, c4.hi, c)
		hi, lo = bits.Mul64(dl, m4.lo)
		hi += dh*m4.lo + dl*m4.hi
		dl, c = bits.Add64(lo, c4.lo, 0)
		dh, _ = bits.Add64(hi, c4.hi, c)
	}
	g.state = u128{dh, dl} // state after the last lane-d draw
	for i := n; i < len(dst); i++ {
		dst[i] = g.Float64()
	}
}
