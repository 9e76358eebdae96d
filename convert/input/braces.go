package input

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxExpansion bounds the number of names one brace pattern may produce.
const MaxExpansion = 10_000_000

// ExpandBraces expands brace patterns the way WebDataset URLs use them:
// numeric ranges "{000..099}" (zero padding kept from the first bound) and
// lists "{a,b,c}", possibly several in one string. A string without braces
// expands to itself.
func ExpandBraces(s string) ([]string, error) {
	out := []string{""}
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			for k := range out {
				out[k] += s
			}
			if strings.IndexByte(s, '}') >= 0 {
				return nil, fmt.Errorf("input: unbalanced '}' in %q", s)
			}
			return out, nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("input: unbalanced '{' in %q", s)
		}
		prefix, body := s[:i], s[i+1:i+j]
		s = s[i+j+1:]
		alts, err := expandOne(body)
		if err != nil {
			return nil, err
		}
		if len(out)*len(alts) > MaxExpansion {
			return nil, fmt.Errorf("input: brace pattern expands to more than %d names", MaxExpansion)
		}
		next := make([]string, 0, len(out)*len(alts))
		for _, o := range out {
			for _, a := range alts {
				next = append(next, o+prefix+a)
			}
		}
		out = next
	}
}

func expandOne(body string) ([]string, error) {
	if lo, hi, ok := strings.Cut(body, ".."); ok {
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := strconv.ParseInt(hi, 10, 64)
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("input: bad brace range {%s}", body)
		}
		if b-a >= MaxExpansion {
			return nil, fmt.Errorf("input: brace range {%s} is longer than %d", body, MaxExpansion)
		}
		width := len(lo)
		out := make([]string, 0, b-a+1)
		for v := a; v <= b; v++ {
			out = append(out, fmt.Sprintf("%0*d", width, v))
		}
		return out, nil
	}
	if strings.Contains(body, ",") {
		return strings.Split(body, ","), nil
	}
	return nil, fmt.Errorf("input: bad brace pattern {%s}: want {a..b} or {x,y}", body)
}
