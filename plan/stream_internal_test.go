package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

// specStreams are the two streams of spec §12.5.
func specStreams() []Stream {
	return []Stream{
		{ShardSizes: []int64{6, 6, 6, 5}, Proportion: ptr(0.75)},
		{ShardSizes: []int64{6, 5}, Proportion: ptr(0.25)},
	}
}

func specOptions() *Options {
	return &Options{Shuffle: true, BatchSize: 4, NumCanonicalNodes: 2, ShuffleBlockSize: 10, EpochSize: 40}
}

func TestSpecResample(t *testing.T) {
	p, err := New(specStreams(), specOptions())
	if err != nil {
		t.Fatal(err)
	}
	var choose []int64
	for _, s := range p.Streams() {
		choose = append(choose, s.Choose)
	}
	if d := cmp.Diff([]int64{30, 10}, choose); d != "" {
		t.Errorf("choose (-want +got):\n%s", d)
	}
	if p.EpochSize() != 40 {
		t.Errorf("epoch size = %d, want 40", p.EpochSize())
	}
	c, err := p.config(EpochSpec{Shape: Shape{1, 2, 2}})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := p.resample(&c, -1)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]int64{6, 3, 6, 4, 6, 5, 5, 5}, rs.unitSizes()); d != "" {
		t.Errorf("units (-want +got):\n%s", d)
	}
	var small []int64
	for x := range rs.total() {
		small = append(small, rs.at(x))
	}
	want := []int64{0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8, 9, 10, 11, 6, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 26, 27, 28, 29, 30, 31, 32, 33}
	if d := cmp.Diff(want, small); d != "" {
		t.Errorf("small_per_big (-want +got):\n%s", d)
	}
}

func TestResampleIdentity(t *testing.T) {
	p, err := New([]Stream{{ShardSizes: []int64{3, 0, 4}}}, &Options{BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.config(EpochSpec{Shape: Shape{1, 1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := p.resample(&c, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !rs.identity || rs.total() != 7 {
		t.Errorf("identity = %v, total = %d; want true, 7", rs.identity, rs.total())
	}
}

func TestGetSampling(t *testing.T) {
	sizes := []int64{5, 7, 3}
	for _, tc := range []struct {
		choose int64
		g      int64
	}{{15, 1}, {30, 1}, {7, 1}, {22, 2}, {1, 4}, {44, 3}} {
		got, err := getSampling(sizes, tc.choose, tc.g, 9176, 3, true)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for k, c := range got {
			sum += c
			full := tc.choose / 15 * sizes[k]
			if c < full || c > full+sizes[k] {
				t.Errorf("choose %d: shard %d gets %d, outside [%d, %d]", tc.choose, k, c, full, full+sizes[k])
			}
		}
		if sum != tc.choose {
			t.Errorf("choose %d granularity %d: total %d (%v)", tc.choose, tc.g, sum, got)
		}
	}
}

func TestResolveStreamsErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		streams []Stream
		epoch   int64
	}{
		"none":        {nil, 0},
		"empty":       {[]Stream{{ShardSizes: []int64{0, 0}}}, 0},
		"two weights": {[]Stream{{ShardSizes: []int64{1}, Repeat: ptr(1.0), Choose: ptr(int64(1))}}, 0},
		"mixed":       {[]Stream{{ShardSizes: []int64{1}, Proportion: ptr(1.0)}, {ShardSizes: []int64{1}}}, 0},
		"negative":    {[]Stream{{ShardSizes: []int64{1}, Proportion: ptr(-1.0)}}, 0},
		"nan":         {[]Stream{{ShardSizes: []int64{1}, Repeat: ptr(nan())}}, 0},
		"neg shard":   {[]Stream{{ShardSizes: []int64{-1, 3}}}, 0},
		"choose+E":    {[]Stream{{ShardSizes: []int64{3}, Choose: ptr(int64(2))}}, 5},
		"zero total":  {[]Stream{{ShardSizes: []int64{3}, Choose: ptr(int64(0))}}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := resolveStreams(tc.streams, tc.epoch, 9176); err == nil {
				t.Error("no error")
			}
		})
	}
}

func nan() float64 {
	z := 0.0
	return z / z
}

func TestRepeatChoose(t *testing.T) {
	infos, err := resolveStreams([]Stream{
		{ShardSizes: []int64{10, 10}, Repeat: ptr(1.5)},
		{ShardSizes: []int64{5}, Choose: ptr(int64(3))},
		{ShardSizes: []int64{4}},
	}, 0, 9176)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, s := range infos {
		got = append(got, s.choose)
	}
	if d := cmp.Diff([]int64{30, 3, 4}, got); d != "" {
		t.Errorf("choose (-want +got):\n%s", d)
	}
}

func TestLocate(t *testing.T) {
	l := newLayout([]streamInfo{{shardSizes: []int64{2, 0, 3}}, {shardSizes: []int64{1}}})
	for id, want := range map[int64][2]int64{0: {0, 0}, 1: {0, 1}, 2: {2, 0}, 4: {2, 2}, 5: {3, 0}} {
		k, j, ok := l.locate(id)
		if !ok || int64(k) != want[0] || j != want[1] {
			t.Errorf("locate(%d) = %d, %d, %v; want %v", id, k, j, ok, want)
		}
	}
	if _, _, ok := l.locate(6); ok {
		t.Error("locate(6) ok")
	}
	if _, _, ok := l.locate(-1); ok {
		t.Error("locate(-1) ok")
	}
}

// TestSamplingMethods checks that "fixed" sampling picks the same partial
// repeats every epoch and "balanced" a different subset per epoch.
func TestSamplingMethods(t *testing.T) {
	streams := []Stream{{ShardSizes: []int64{50, 50, 50}, Proportion: ptr(1.0)}}
	pick := func(method string, epoch int64) []int64 {
		p, err := New(streams, &Options{Shuffle: true, BatchSize: 1, EpochSize: 200, SamplingMethod: method})
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.config(EpochSpec{Epoch: epoch, Shape: Shape{1, 1, 1}})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := p.resample(&c, -1)
		if err != nil {
			t.Fatal(err)
		}
		if rs.total() != 200 {
			t.Fatalf("epoch size %d, want 200", rs.total())
		}
		var ids []int64
		for x := range rs.total() {
			ids = append(ids, rs.at(x))
		}
		return ids
	}
	if d := cmp.Diff(pick(SamplingFixed, 0), pick(SamplingFixed, 3)); d != "" {
		t.Errorf("fixed sampling differs between epochs:\n%s", d)
	}
	if cmp.Equal(pick(SamplingBalanced, 0), pick(SamplingBalanced, 3)) {
		t.Error("balanced sampling picked the same subset in epochs 0 and 3")
	}
	// Every sample appears once, plus 50 distinct repeats.
	count := map[int64]int{}
	for _, x := range pick(SamplingBalanced, 1) {
		count[x]++
	}
	twice := 0
	for x := range int64(150) {
		switch count[x] {
		case 1:
		case 2:
			twice++
		default:
			t.Fatalf("sample %d appears %d times", x, count[x])
		}
	}
	if twice != 50 {
		t.Errorf("%d samples repeated, want 50", twice)
	}
}
