package model

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// TuningRow is one measured transfer of a tuning campaign such as the
// XSEDE Stampede->Gordon runs (SGData.csv): a dataset moved with a given
// parallelism, concurrency and pipelining.
type TuningRow struct {
	FileSize    int64
	FileCount   int
	Bandwidth   float64 // link capacity, bit/s
	RTT         float64 // seconds
	Parallelism int
	Concurrency int
	Pipelining  int
	Throughput  float64 // Mbit/s
	Duration    float64 // seconds
	// Path names what else the row was measured under, from the
	// optional columns Source, Destination, BufferSize and Fast, with
	// Bandwidth and RTT: rows of different paths or settings never share
	// a curve.
	Path string
}

// ReadTuningCSV reads a tuning campaign in the SGData.csv layout. Columns
// are found by header name, whatever their order and case, and a unit in
// parentheses after a name ("Throughput (Mbit/s)") is ignored; a file
// separated by semicolons or tabs instead of commas is read as such.
// Errors name the line of the file.
func ReadTuningCSV(r io.Reader) ([]TuningRow, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	if first, _ := br.Peek(64 << 10); len(first) > 0 {
		// encoding/csv ends lines at \n (\r\n too) but not at a bare \r:
		// a file saved with classic-Mac line endings would be read as one
		// long header, and the error would be about its columns.
		if s := strings.TrimRight(string(first), "\r"); !strings.Contains(s, "\n") && strings.Contains(s, "\r") {
			return nil, errors.New("tuning csv: lines end in a bare carriage return (\\r, classic Mac); save the file with \\n or \\r\\n line endings")
		}
		line, _, _ := strings.Cut(string(first), "\n")
		if !strings.Contains(line, ",") {
			for _, sep := range []rune{';', '\t'} {
				if strings.ContainsRune(line, sep) {
					cr.Comma = sep
					break
				}
			}
		}
	}
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("tuning csv: reading header: %w", err)
	}
	col := map[string]int{}
	bwScale := 1.0 // Bandwidth's unit in bit/s
	for i, h := range head {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff") // a byte-order mark, as spreadsheets write
		}
		if err := checkUnit(h); err != nil {
			return nil, err
		}
		if headerKey(h) == "bandwidth" {
			bwScale = bandwidthScale(h)
		}
		h = headerKey(h)
		if _, dup := col[h]; dup && h != "" {
			return nil, fmt.Errorf("tuning csv: column %q appears twice in the header", head[i])
		}
		col[h] = i
	}
	need := []string{"FileSize", "FileCount", "Bandwidth", "RTT", "Parallelism", "Concurrency", "Pipelining", "Throughput", "Duration"}
	for _, n := range need {
		if _, ok := col[headerKey(n)]; !ok {
			return nil, fmt.Errorf("tuning csv: no %q column in header %v (want a comma-separated file with the columns %s)", n, head, strings.Join(need, ", "))
		}
	}
	// Optional columns that tell one path or setting from another.
	var ident []string
	for _, n := range []string{"Source", "Destination", "BufferSize", "Fast"} {
		if _, ok := col[headerKey(n)]; ok {
			ident = append(ident, n)
		}
	}
	var rows []TuningRow
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("tuning csv: %w", err) // a csv.ParseError names its line
		}
		// Only after a successful Read: FieldPos panics when the record
		// that failed (an unterminated quote) has no field.
		line, _ := cr.FieldPos(0)
		f := func(name string) (float64, error) {
			i := col[headerKey(name)]
			if i >= len(rec) {
				return 0, fmt.Errorf("tuning csv line %d: missing %s", line, name)
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
			if err != nil {
				hint := ""
				if _, err := strconv.ParseFloat(strings.Replace(strings.TrimSpace(rec[i]), ",", ".", 1), 64); err == nil {
					hint = " (a decimal comma? write numbers with a point)"
				}
				return 0, fmt.Errorf("tuning csv line %d: %s %q is not a number%s", line, name, rec[i], hint)
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("tuning csv line %d: %s %q: not a finite number", line, name, rec[i])
			}
			switch name {
			case "FileSize", "FileCount", "Parallelism", "Concurrency", "Pipelining":
				// Counts: whole numbers, and levels of at least one.
				min := 1.0
				if name == "FileSize" {
					min = 0
				}
				if v != math.Trunc(v) || v < min || v > 1<<53 {
					return 0, fmt.Errorf("tuning csv line %d: %s %q: want a whole number of at least %g", line, name, rec[i], min)
				}
			}
			return v, nil
		}
		var v [9]float64
		for i, n := range need {
			if v[i], err = f(n); err != nil {
				return nil, err
			}
		}
		v[2] *= bwScale
		path := fmt.Sprintf("%s b/s, RTT %s s", strings.TrimSpace(rec[col[headerKey("Bandwidth")]]), strings.TrimSpace(rec[col[headerKey("RTT")]]))
		if bwScale != 1 {
			path = fmt.Sprintf("%g b/s, RTT %s s", v[2], strings.TrimSpace(rec[col[headerKey("RTT")]]))
		}
		for _, n := range ident {
			i := col[headerKey(n)]
			if i >= len(rec) {
				// Left out of the path, the row would form a curve of
				// its own, apart from the rest of its campaign.
				return nil, fmt.Errorf("tuning csv line %d: missing %s", line, n)
			}
			path += ", " + n + " " + strings.TrimSpace(rec[i])
		}
		rows = append(rows, TuningRow{
			FileSize: int64(v[0]), FileCount: int(v[1]), Bandwidth: v[2], RTT: v[3],
			Parallelism: int(v[4]), Concurrency: int(v[5]), Pipelining: int(v[6]),
			Throughput: v[7], Duration: v[8], Path: path,
		})
	}
	if len(rows) == 0 {
		return nil, errors.New("tuning csv: no rows")
	}
	return rows, nil
}

// units are the units the columns are read in; a header that names
// another ("Throughput (Gbit/s)") is refused rather than misread.
// Bandwidth, the link's nominal capacity, is read in bit/s unless its
// header names Mbit/s or Gbit/s: campaigns write it either way (10000
// for a 10 Gb/s link), and the figure only bounds plausible rows.
var units = map[string][]string{
	"bandwidth": {"bit/s", "b/s", "bps",
		"Mbit/s", "Mb/s", "Mbps", "Gbit/s", "Gb/s", "Gbps"},
	"rtt":        {"s", "sec", "seconds"},
	"throughput": {"Mbit/s", "Mb/s", "Mbps"},
	"duration":   {"s", "sec", "seconds"},
	"buffersize": {"B", "bytes"},
	"filesize":   {"B", "bytes"},
}

// checkUnit refuses a header whose unit in parentheses is not the one its
// column is read in.
func checkUnit(h string) error {
	i := strings.Index(h, "(")
	j := strings.LastIndex(h, ")")
	if i <= 0 || j < i {
		return nil
	}
	want, ok := units[headerKey(h)]
	if !ok {
		return nil
	}
	unit := strings.TrimSpace(h[i+1 : j])
	for _, u := range want {
		// Case aside, except for bits and bytes: MB/s is not Mb/s.
		if strings.EqualFold(unit, u) && namesBytes(unit) == namesBytes(u) {
			return nil
		}
	}
	switch {
	case namesBytes(unit) && !namesBytes(want[0]):
		return fmt.Errorf("tuning csv: column %q: unit %q counts bytes, but the column is read in %s (bits)", strings.TrimSpace(h), h[i+1:j], want[0])
	case !namesBytes(unit) && namesBytes(want[0]):
		return fmt.Errorf("tuning csv: column %q: unit %q counts bits, but the column is read in %s", strings.TrimSpace(h), h[i+1:j], want[0])
	}
	return fmt.Errorf("tuning csv: column %q: unit %q, but it is read in %s", strings.TrimSpace(h), h[i+1:j], want[0])
}

// bandwidthScale is the Bandwidth column's unit in bit/s, from its header
// (checked by checkUnit): 1e6 for Mbit/s, 1e9 for Gbit/s, else 1.
func bandwidthScale(h string) float64 {
	i, j := strings.Index(h, "("), strings.LastIndex(h, ")")
	if i <= 0 || j < i {
		return 1
	}
	switch u := strings.TrimSpace(h[i+1 : j]); {
	case strings.HasPrefix(u, "M"), strings.HasPrefix(u, "m"):
		return 1e6
	case strings.HasPrefix(u, "G"), strings.HasPrefix(u, "g"):
		return 1e9
	}
	return 1
}

// namesBytes reports whether a unit counts bytes: "byte" spelled out, or
// a capital B that does not begin "Bit" (by the usual convention b is a
// bit and B a byte: Mb/s against MB/s, bps against Bps).
func namesBytes(unit string) bool {
	lower := strings.ToLower(unit)
	if strings.Contains(lower, "byte") {
		return true
	}
	for i := range unit {
		if unit[i] == 'B' && !strings.HasPrefix(lower[i:], "bit") {
			return true
		}
	}
	return false
}

// headerKey is a column name as matched: case and spacing aside, and
// without a unit in parentheses.
func headerKey(h string) string {
	if i := strings.Index(h, "("); i > 0 {
		h = h[:i]
	}
	return strings.ToLower(strings.Join(strings.Fields(h), ""))
}
