package model

import (
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
}

// ReadTuningCSV reads a tuning campaign in the SGData.csv layout (columns
// are found by header name, so their order does not matter).
func ReadTuningCSV(r io.Reader) ([]TuningRow, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("tuning csv: reading header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff") // a byte-order mark, as spreadsheets write
		}
		h = strings.TrimSpace(h)
		if _, dup := col[h]; dup && h != "" {
			return nil, fmt.Errorf("tuning csv: column %q appears twice in the header", h)
		}
		col[h] = i
	}
	need := []string{"FileSize", "FileCount", "Bandwidth", "RTT", "Parallelism", "Concurrency", "Pipelining", "Throughput", "Duration"}
	for _, n := range need {
		if _, ok := col[n]; !ok {
			return nil, fmt.Errorf("tuning csv: no %q column in header %v", n, head)
		}
	}
	var rows []TuningRow
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("tuning csv line %d: %w", line, err)
		}
		f := func(name string) (float64, error) {
			i := col[name]
			if i >= len(rec) {
				return 0, fmt.Errorf("tuning csv line %d: missing %s", line, name)
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
			if err != nil {
				return 0, fmt.Errorf("tuning csv line %d: %s %q: %w", line, name, rec[i], err)
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
		rows = append(rows, TuningRow{
			FileSize: int64(v[0]), FileCount: int(v[1]), Bandwidth: v[2], RTT: v[3],
			Parallelism: int(v[4]), Concurrency: int(v[5]), Pipelining: int(v[6]),
			Throughput: v[7], Duration: v[8],
		})
	}
	if len(rows) == 0 {
		return nil, errors.New("tuning csv: no rows")
	}
	return rows, nil
}
