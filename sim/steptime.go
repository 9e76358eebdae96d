package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// StepTime draws each training step's compute time.
type StepTime interface {
	// Draw returns the compute time of one step.
	Draw(r *rand.Rand) time.Duration
	// String describes the distribution in ParseStepTime's syntax.
	String() string
}

// Fixed is a constant step time.
type Fixed time.Duration

// Draw returns the constant.
func (f Fixed) Draw(*rand.Rand) time.Duration { return time.Duration(f) }

func (f Fixed) String() string { return time.Duration(f).String() }

// Normal is a normal distribution truncated at zero.
type Normal struct{ Mean, StdDev time.Duration }

// Draw returns one draw, never negative.
func (n Normal) Draw(r *rand.Rand) time.Duration {
	x := float64(n.Mean) + r.NormFloat64()*float64(n.StdDev)
	return time.Duration(math.Min(math.Max(0, x), math.MaxInt64/2))
}

func (n Normal) String() string { return fmt.Sprintf("normal:%s,%s", n.Mean, n.StdDev) }

// Uniform is a uniform distribution on [Min, Max].
type Uniform struct{ Min, Max time.Duration }

// Draw returns one draw.
func (u Uniform) Draw(r *rand.Rand) time.Duration {
	return u.Min + time.Duration(r.Float64()*float64(u.Max-u.Min))
}

func (u Uniform) String() string { return fmt.Sprintf("uniform:%s,%s", u.Min, u.Max) }

// ParseStepTime reads a step time: a duration ("500ms"),
// "normal:MEAN,STDDEV" or "uniform:MIN,MAX".
func ParseStepTime(s string) (StepTime, error) {
	kind, args, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		d, err := parseDur(kind)
		if err != nil {
			return nil, err
		}
		return Fixed(d), nil
	}
	a, b, ok := strings.Cut(args, ",")
	if !ok {
		return nil, fmt.Errorf("%w: step time %q: want %s:A,B", ErrInvalid, s, kind)
	}
	x, err := parseDur(a)
	if err != nil {
		return nil, err
	}
	y, err := parseDur(b)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "normal":
		return Normal{x, y}, nil
	case "uniform":
		if y < x {
			return nil, fmt.Errorf("%w: step time %q: max below min", ErrInvalid, s)
		}
		return Uniform{x, y}, nil
	}
	return nil, fmt.Errorf("%w: step time %q: unknown distribution %q (want normal or uniform)", ErrInvalid, s, kind)
}

func parseDur(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 && f < 1e9 {
		return time.Duration(f * float64(time.Second)), nil
	}
	return 0, fmt.Errorf("%w: %q is not a non-negative duration", ErrInvalid, s)
}
