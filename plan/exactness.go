package plan

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluicedata/sluice/partition"
)

// ErrInexactResume is matched (errors.Is) by the error of
// Epoch.ResumeCheck: the resumed epoch does not deliver exactly the samples
// the stopped run had not delivered, each once.
var ErrInexactResume = errors.New("plan: resume is not exactly-once")

// ResumeCheck says whether this epoch, resumed at SampleInEpoch > 0,
// continues the stopped run exactly: every sample the stopped run had not
// delivered is delivered once, none it had delivered is delivered again,
// and the only repeats are the padding that the whole epoch played on this
// shape would also have. It returns nil for a fresh epoch and for an exact
// resume, else an error matching ErrInexactResume that names each cause and
// how many samples it repeats.
//
// The order itself is MosaicML's in every case (Sluice reproduces it); the
// causes are MosaicML's own, which it does not report:
//
//   - sample_in_epoch not a multiple of the physical node count (of the
//     initial one for a relaxed re-deal): it is rounded down, so the
//     remainder's samples are delivered again (spec §9.2 step 2; MosaicML
//     logs a warning).
//   - the remaining samples per node not a multiple of the ranks per node,
//     on a shape where the whole epoch would divide differently: each node
//     repeats its last samples to even out its ranks (spec §9.2 step 7).
//     Resuming on the shape that saved the state causes this only in the
//     last steps of an epoch, when fewer samples per node remain than
//     ranks plus the padding.
//   - canonical nodes fewer than physical nodes, with a per-node padding
//     that differs between the initial node count and this one: the
//     canonical order itself changed, so samples may repeat and others be
//     skipped (spec §9.2 step 3).
//   - for the per_stream, stratified and device_per_stream batching
//     methods, sample_in_epoch not a multiple of this shape's global batch:
//     whole global batches are skipped, so the partial one is delivered
//     again. Their batches also depend on the global batch size, so a
//     resume that changes it is not exact either; the state does not record
//     it, so a change that still divides sample_in_epoch goes unreported.
//
// A run that stops on P·R ranks after the same number of samples on every
// rank and resumes on the same P·R ranks is exact (but for the end of an
// epoch, above), with any number of workers and, for random batching (the
// default), any batch size.
func (e *Epoch) ResumeCheck() error {
	c := &e.c
	drop := c.sampleInEpoch
	if drop == 0 {
		return nil
	}
	s := c.shape
	var causes []string
	if c.batchingMethod != BatchingRandom {
		if G := int64(s.NumRanks()) * int64(c.batchSize); drop%G != 0 {
			causes = append(causes, fmt.Sprintf("sample_in_epoch %d is not a multiple of the global batch size %d (%d ranks × batch_size %d): with batching_method %q whole global batches are skipped, so %d samples are delivered again, and its batches depend on the global batch size, which must not change",
				drop, G, s.NumRanks(), c.batchSize, c.batchingMethod, drop%G))
		}
	} else {
		causes = e.randomResumeCauses()
	}
	if len(causes) == 0 {
		return nil
	}
	return fmt.Errorf("%w: resuming epoch %d at sample_in_epoch %d on %d nodes × %d ranks: %s",
		ErrInexactResume, c.epoch, drop, s.Nodes, s.RanksPerNode, strings.Join(causes, "; "))
}

// randomResumeCauses evaluates the orig partition's padding rules (spec
// §9.2) for random batching.
func (e *Epoch) randomResumeCauses() []string {
	c := &e.c
	drop := c.sampleInEpoch
	n := e.rnd.rs.total()
	C, P, R := int64(c.ncn), int64(c.shape.Nodes), int64(c.shape.RanksPerNode)
	ipn := int64(c.initialPhysicalNodes)
	algo := c.partitionAlgo
	if algo == "" {
		algo = partition.DefaultAlgo
	}
	divides := func(p int64) bool { return (p <= C && C%p == 0) || (p > C && p%C == 0) }
	// The relaxed algorithm re-deals the partition of the initial node
	// count when this one does not divide or is not divided by C.
	pe := P
	if algo == partition.Relaxed && ipn > 0 && !divides(P) {
		pe = ipn
	}
	var causes []string
	if r := drop % pe; r != 0 {
		causes = append(causes, fmt.Sprintf("sample_in_epoch is not a multiple of the %d physical nodes the partition is dealt to, so it is rounded down and %d samples already delivered are delivered again", pe, r))
	}
	total := C * paddedPerCanonical(n, C, pe)
	drop -= drop % pe
	if drop < total {
		// The rank padding of the rest (u per node) against that of the whole
		// epoch on this shape (u0): the rest's padding copies node positions
		// [L0-R-u+1, L0-R+1), a subset of the whole epoch's when u ≤ u0 and
		// neither is the few-samples fill, which copies from the start.
		l0, l := total/pe, (total-drop)/pe
		u0, u := (R-l0%R)%R, (R-l%R)%R
		switch {
		case u > 0 && R+u-1 > l:
			causes = append(causes, fmt.Sprintf("only %d samples per node remain for %d ranks per node, so each node repeats %d of them from the start of the rest (%d in all)", l, R, u, u*pe))
		case u > 0 && (u > u0 || R+u0-1 > l0):
			causes = append(causes, fmt.Sprintf("the %d remaining samples per node do not divide over %d ranks per node, so each node repeats %d of them (%d in all) where the whole epoch on this shape repeats %d (the stopped world's progress, sample_in_epoch, is not a multiple of this world's %d ranks)", l, R, u, u*pe, u0*pe, P*R))
		}
	}
	if ipn > 0 && ipn != pe && paddedPerCanonical(n, C, ipn) != paddedPerCanonical(n, C, pe) {
		causes = append(causes, fmt.Sprintf("with %d canonical nodes the canonical order pads differently for %d physical nodes than for the initial %d, so the order changed: samples repeat and others are skipped (keep num_canonical_nodes a multiple of every node count)", C, pe, ipn))
	}
	return causes
}

// paddedPerCanonical is S' of spec §9.2 step 3: ceil(n/C), padded to a
// multiple of P/C when C < P.
func paddedPerCanonical(n, C, P int64) int64 {
	s := (n + C - 1) / C
	if C < P {
		if ratio := P / C; s%ratio != 0 {
			s += ratio - s%ratio
		}
	}
	return s
}
