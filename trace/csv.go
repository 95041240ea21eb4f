package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// csvHeader is the column order WriteCSV uses.
var csvHeader = [...]string{"id", "arrival", "src", "dst", "size", "batch", "path"}

// csvRequired are the columns a CSV trace must have; id, batch and path may
// be omitted (IDs are then assigned in arrival order, batch is false).
var csvRequired = [...]string{"arrival", "src", "dst", "size"}

// ReadCSV reads a trace from CSV with a header row naming the columns
// id,arrival,src,dst,size,batch,path in any order (case-insensitive; unknown
// columns are ignored so that richer exports load as they are). arrival is
// in seconds, size in bytes, batch is 0/1/true/false or empty. Input need
// not be sorted. Errors name the offending line.
func ReadCSV(r io.Reader) (*Trace, error) {
	t, _, err := readCSV(r)
	return t, err
}

func readCSV(r io.Reader) (*Trace, *LoadReport, error) {
	rep := &LoadReport{Format: "csv"}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // checked below, with a clearer message
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true

	header, err := cr.Read()
	if err == io.EOF {
		return nil, rep, errors.New("csv: empty input, want a header line")
	}
	if err != nil {
		return nil, rep, csvErr(err, 1)
	}
	rep.Lines++
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := col[h]; dup && h != "" {
			return nil, rep, &ParseError{Line: 1, Err: fmt.Errorf("duplicate column %q", h)}
		}
		col[h] = i
	}
	for _, c := range csvRequired {
		if _, ok := col[c]; !ok {
			return nil, rep, &ParseError{Line: 1, Err: fmt.Errorf("header lacks column %q (have %q)", c, strings.Join(header, ","))}
		}
	}
	idCol, haveIDs := col["id"]
	batchCol, haveBatch := col["batch"]
	pathCol, havePath := col["path"]
	ncol := len(header)

	var ts []Transfer
	line := 1 // of the last record read
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, rep, csvErr(err, line+1)
		}
		rep.Lines++
		line, _ = cr.FieldPos(0)
		fail := func(err error) (*Trace, *LoadReport, error) {
			return nil, rep, &ParseError{Line: line, Err: err}
		}
		if len(rec) != ncol {
			return fail(fmt.Errorf("%d fields, header has %d", len(rec), ncol))
		}
		var x Transfer
		if x.Arrival, err = parseArrival(rec[col["arrival"]]); err != nil {
			return fail(err)
		}
		if x.Size, err = parseSize(rec[col["size"]]); err != nil {
			return fail(err)
		}
		x.Src, x.Dst = rec[col["src"]], rec[col["dst"]]
		if haveIDs {
			s := strings.TrimSpace(rec[idCol])
			if s == "" {
				// One missing ID voids them all: the rest cannot be
				// trusted to be a consistent numbering.
				haveIDs = false
			} else if x.ID, err = strconv.ParseInt(s, 10, 64); err != nil {
				return fail(fmt.Errorf("id %q: %w", s, numErr(err)))
			}
		}
		if haveBatch {
			if x.Batch, err = parseBatch(rec[batchCol]); err != nil {
				return fail(err)
			}
		}
		if havePath {
			x.Path = rec[pathCol]
		}
		ts = append(ts, x)
	}
	rep.Renumbered = finish(ts, haveIDs)
	rep.Parsed = len(ts)
	return &Trace{Transfers: ts}, rep, nil
}

func parseBatch(s string) (bool, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("batch %q: want 0, 1, true or false", s)
	}
	return b, nil
}

// csvErr turns encoding/csv's error into a ParseError with its line. A
// read error (a truncated archive) carries none, so it is given the line
// after the last record read.
func csvErr(err error, line int) error {
	if pe, ok := errors.AsType[*csv.ParseError](err); ok {
		return &ParseError{Line: pe.Line, Err: pe.Err}
	}
	return &ParseError{Line: line, Err: fmt.Errorf("csv: reading: %w", err)}
}

// WriteCSV writes t with the header id,arrival,src,dst,size,batch,path.
// Arrivals use the shortest decimal that reads back to the same float64, so
// ReadCSV(WriteCSV(t)) reproduces t exactly (except Name, which CSV lacks).
func WriteCSV(w io.Writer, t *Trace) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader[:]); err != nil {
		return err
	}
	rec := make([]string, len(csvHeader))
	for _, x := range t.Transfers {
		rec[0] = strconv.FormatInt(x.ID, 10)
		rec[1] = strconv.FormatFloat(x.Arrival, 'f', -1, 64)
		rec[2] = x.Src
		rec[3] = x.Dst
		rec[4] = strconv.FormatInt(x.Size, 10)
		rec[5] = "0"
		if x.Batch {
			rec[5] = "1"
		}
		rec[6] = x.Path
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
