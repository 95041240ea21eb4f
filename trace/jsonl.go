package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// jsonTransfer mirrors Transfer with pointers, so that a missing required
// field is an error rather than a silent zero (an arrival of 0 and a size of
// 0 are both legitimate values).
type jsonTransfer struct {
	ID      *json.Number `json:"id"`
	Arrival *float64     `json:"arrival"`
	Src     *string      `json:"src"`
	Dst     *string      `json:"dst"`
	Size    *json.Number `json:"size"`
	Batch   *bool        `json:"batch"`
	Path    *string      `json:"path"`
}

// ReadJSONL reads a trace from JSON Lines: one object per line with
// Transfer's JSON fields (arrival, src, dst and size required; id, batch and
// path optional; unknown fields ignored). Blank lines are skipped. Input need
// not be sorted. Errors name the offending line.
func ReadJSONL(r io.Reader) (*Trace, error) {
	t, _, err := readJSONL(r)
	return t, err
}

func readJSONL(r io.Reader) (*Trace, *LoadReport, error) {
	rep := &LoadReport{Format: "jsonl"}
	br := bufio.NewReader(r)
	skipBOM(br)
	haveIDs := true
	var ts []Transfer
	for line := 1; ; line++ {
		// ReadBytes rather than a Scanner: no line-length limit to trip
		// over on long paths.
		b, rerr := br.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, rep, &ParseError{Line: line, Err: fmt.Errorf("jsonl: reading: %w", rerr)}
		}
		if len(b) == 0 && rerr == io.EOF {
			break
		}
		rep.Lines++
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			rep.Blank++
		} else {
			x, hasID, err := parseJSONLine(b)
			if err != nil {
				return nil, rep, &ParseError{Line: line, Err: err}
			}
			haveIDs = haveIDs && hasID
			ts = append(ts, x)
		}
		if rerr == io.EOF {
			break
		}
	}
	rep.Renumbered = finish(ts, haveIDs && len(ts) > 0)
	rep.Parsed = len(ts)
	return &Trace{Transfers: ts}, rep, nil
}

func parseJSONLine(b []byte) (x Transfer, hasID bool, err error) {
	if b[0] != '{' {
		return x, false, errors.New("want a JSON object")
	}
	var j jsonTransfer
	if err := json.Unmarshal(b, &j); err != nil {
		return x, false, err
	}
	switch {
	case j.Arrival == nil:
		return x, false, errors.New("missing \"arrival\"")
	case j.Size == nil:
		return x, false, errors.New("missing \"size\"")
	case j.Src == nil:
		return x, false, errors.New("missing \"src\"")
	case j.Dst == nil:
		return x, false, errors.New("missing \"dst\"")
	}
	x.Arrival = *j.Arrival
	if err := checkArrival(x.Arrival); err != nil {
		return x, false, fmt.Errorf("arrival %v: %w", x.Arrival, err)
	}
	if x.Size, err = parseSize(j.Size.String()); err != nil {
		return x, false, err
	}
	x.Src, x.Dst = *j.Src, *j.Dst
	if j.ID != nil {
		if x.ID, err = j.ID.Int64(); err != nil {
			return x, false, fmt.Errorf("id %q: %w", j.ID.String(), numErr(err))
		}
		hasID = true
	}
	if j.Batch != nil {
		x.Batch = *j.Batch
	}
	if j.Path != nil {
		x.Path = *j.Path
	}
	return x, hasID, nil
}

// WriteJSONL writes t as JSON Lines, one Transfer per line. Float64 values
// are written in their shortest round-trip form, so ReadJSONL reads back
// exactly what was written (except Name, which the format lacks).
func WriteJSONL(w io.Writer, t *Trace) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // paths with & or < stay readable
	for _, x := range t.Transfers {
		if err := enc.Encode(x); err != nil {
			return err
		}
	}
	return bw.Flush()
}
