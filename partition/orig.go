package partition

import (
	"fmt"
	"math/bits"
)

// orig is upstream's get_partitions_orig evaluated per element (spec §9.2).
//
// The pipeline, with every stage an index function rather than an array:
//
//	matrix(c, j)   C × S' canonical rows (row starts, short-row fix, padding
//	               columns, or the cyclic degenerate fill)
//	seq(i)         = matrix(i mod C, i div C), read column by column
//	node(p, q)     = seq(drop + p + q·P) for q < L, then the rank padding
//	rank(p, r, t)  = node(p, t·R + r) for t < Mr, then -1
//	out(p,r,w,b,i) = rank(p, r, (b·W + w)·B + i)
type orig struct {
	n          int64
	c, p, r, w int
	b          int
	drop       int64 // rounded down to a multiple of p
	s, sp      int64 // samples per canonical node, padded
	ratio, pad int64
	degenerate bool
	rowStart   []int64 // c·N/C
	short      []bool  // row has only S-1 real samples
	l          int64   // samples per physical node after the drop
	u          int64   // rank padding per node
	mr         int64   // samples per rank (before worker/batch padding)
	nb         int     // batches per worker
}

func newOrig(n int64, c, p, r, w, b int, drop int64) (*orig, error) {
	if c < p && p%c != 0 || p < c && c%p != 0 {
		return nil, fmt.Errorf("%w: either canonical (%d) or physical (%d) nodes must be evenly divisible by the other", ErrInvalid, c, p)
	}
	o := &orig{n: n, c: c, p: p, r: r, w: w, b: b}
	o.drop = drop - drop%int64(p)
	C := int64(c)
	o.s = (n + C - 1) / C
	if c < p {
		o.ratio = int64(p / c)
		if ov := o.s % o.ratio; ov != 0 {
			o.pad = o.ratio - ov
		}
	}
	o.sp = o.s + o.pad
	o.degenerate = !(n > C || (n == C && c >= p))
	if !o.degenerate {
		o.rowStart = make([]int64, c+1)
		for k := range o.rowStart {
			hi, lo := bits.Mul64(uint64(k), uint64(n))
			q, _ := bits.Div64(hi, lo, uint64(c))
			o.rowStart[k] = int64(q)
		}
		o.short = make([]bool, c)
		for k := range c {
			o.short[k] = o.rowStart[k+1]-o.rowStart[k] < o.s
		}
		if o.pad > 0 && o.s-o.pad-o.ratio+1 < 0 {
			return nil, fmt.Errorf("%w: %d samples over %d canonical and %d physical nodes leave too few samples per canonical node (%d) to pad to a multiple of %d", ErrInvalid, n, c, p, o.s, o.ratio)
		}
	}
	total := C * o.sp
	if o.drop > total {
		o.l = 0
	} else {
		o.l = (total - o.drop) / int64(p)
	}
	if ov := o.l % int64(r); ov != 0 {
		o.u = int64(r) - ov
	}
	o.mr = (o.l + o.u) / int64(r)
	wb := int64(w) * int64(b)
	o.nb = int((o.mr + wb - 1) / wb)
	return o, nil
}

func (o *orig) shape() Shape {
	return Shape{o.p, o.r, o.w, o.nb, o.b}
}

// matrix returns canonical row c, column j (j < S').
func (o *orig) matrix(c, j int64) int64 {
	if o.degenerate {
		return (c*o.sp + j) % o.n
	}
	if j >= o.s {
		// Padding columns copy columns [S-pad-ratio+1, S-ratio+1).
		j = j - o.s + o.s - o.pad - o.ratio + 1
	}
	v := o.rowStart[c] + j
	if j == o.s-1 && o.short[c] {
		v--
	}
	return v
}

// node returns element q (< L+u) of physical node p's list.
func (o *orig) node(p, q int64) int64 {
	if q >= o.l {
		k := q - o.l
		if int64(o.r)+o.u-1 <= o.l {
			q = o.l - int64(o.r) - o.u + 1 + k
		} else {
			q = k % o.l
		}
	}
	i := o.drop + p + q*int64(o.p)
	C := int64(o.c)
	return o.matrix(i%C, i/C)
}

func (o *orig) at(p, r, w, b, i int) int64 {
	t := (int64(b)*int64(o.w)+int64(w))*int64(o.b) + int64(i)
	if t >= o.mr {
		return -1
	}
	return o.node(int64(p), t*int64(o.r)+int64(r))
}

// appendWorker appends worker (p, r, w)'s entries. Within a batch, t grows
// by one, so the canonical index i = drop + p + (t·R + r)·P grows by R·P;
// the loop steps (row, column) incrementally instead of dividing.
func (o *orig) appendWorker(dst []int64, p, r, w int) []int64 {
	C := int64(o.c)
	step := int64(o.r) * int64(o.p)
	dc, dj := step%C, step/C
	for b := range o.nb {
		t := (int64(b)*int64(o.w) + int64(w)) * int64(o.b)
		// Entries with q = t·R + r < L read the canonical order directly.
		i := o.drop + int64(p) + (t*int64(o.r)+int64(r))*int64(o.p)
		c, j := i%C, i/C
		for k := range o.b {
			tk := t + int64(k)
			switch q := tk*int64(o.r) + int64(r); {
			case tk >= o.mr:
				dst = append(dst, -1)
			case q >= o.l:
				dst = append(dst, o.node(int64(p), q))
			default:
				dst = append(dst, o.matrix(c, j))
			}
			c += dc
			j += dj
			if c >= C {
				c -= C
				j++
			}
		}
	}
	return dst
}
