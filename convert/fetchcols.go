package convert

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"sync"

	"github.com/sluicedata/sluice/convert/fetch"
	"github.com/sluicedata/sluice/convert/input"
	"github.com/sluicedata/sluice/format/mds"
)

// fetchCol is a URL column's fetch plan: its position in the layout and
// the check (or conversion) its fetched bytes go through.
type fetchCol struct {
	name   string
	k      int
	enc    string
	reason string // failure reason of a value that does not fit enc
	// fix checks (and for pil converts) the fetched bytes.
	fix func([]byte) ([]byte, error)
}

// fetchPlan builds the fetch columns of the layout, in layout order (so
// that the failure reason recorded for a row does not depend on map
// order).
func (p *pipeline) fetchPlan() []fetchCol {
	var out []fetchCol
	for i, c := range p.lay.cols {
		enc, ok := p.r.fetchIdx[c.name]
		if !ok {
			continue
		}
		fc := fetchCol{name: c.name, k: i, enc: enc, reason: "invalid_" + enc}
		switch enc {
		case "pil":
			pil, _ := mds.ParseEncoding("pil") // a known encoding
			fc.fix = func(b []byte) ([]byte, error) {
				if err := fetch.CheckImage(b, ""); err != nil {
					return nil, err
				}
				img, _, err := image.Decode(bytes.NewReader(b))
				if err != nil {
					return nil, fmt.Errorf("%w: %w", fetch.ErrEncoding, err)
				}
				return pil.Append(nil, img)
			}
		default:
			if check := fetch.CheckEncoding(enc); check != nil {
				fc.fix = func(b []byte) ([]byte, error) { return b, check(b) }
			}
		}
		out = append(out, fc)
	}
	return out
}

// fetchBatch fetches the URL columns of every row of b concurrently
// (bounded by the Fetcher), checks each object against its column's
// encoding and replaces each URL by the bytes. Rows with a failed fetch or
// check are marked skipped with the failure's reason (the first failing
// column's, in column order); a failed check counts as a failed fetch.
func (p *pipeline) fetchBatch(ctx context.Context, b *batch, rows []input.Value) error {
	ncols := len(p.lay.cols)
	reasons := make([]string, len(b.items)*len(p.fetchCols)) // per row and fetch column
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range b.items {
		if b.reasons[i] != "" {
			continue
		}
		for j := range p.fetchCols {
			fc := &p.fetchCols[j]
			v := &rows[i*ncols+fc.k]
			b.fetched++
			if v.Kind != input.String && v.Kind != input.Text {
				reasons[i*len(p.fetchCols)+j] = "bad_url"
				continue
			}
			url := string(v.Bytes)
			wg.Add(1)
			go func() {
				defer wg.Done()
				data, err := p.fetcher.Fetch(ctx, url)
				reason := ""
				if err != nil {
					reason = fetch.Reason(err)
				} else if fc.fix != nil {
					if data, err = fc.fix(data); err != nil {
						reason = fc.reason
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if reason != "" {
					reasons[i*len(p.fetchCols)+j] = reason
					return
				}
				b.fetchOK++
				*v = input.Value{Kind: input.Bytes, Bytes: data}
			}()
		}
	}
	wg.Wait()
	for i := range b.items {
		for j := range p.fetchCols {
			if r := reasons[i*len(p.fetchCols)+j]; r != "" && b.reasons[i] == "" {
				b.reasons[i] = r
			}
		}
	}
	return ctx.Err()
}
