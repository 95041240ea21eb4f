package trace

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParseError is a problem with one line of an input file. Path is empty
// when the input was a bare io.Reader.
type ParseError struct {
	Path string
	Line int
	Err  error
}

func (e *ParseError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%s line %d: %v", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// MaxWarnings bounds LoadReport.Warnings so that a huge, mostly broken log
// cannot make the report itself huge; the counters stay exact.
const MaxWarnings = 20

// LoadReport says what a loader did with its input, so that a user replaying
// their own logs can see what was left out and why.
type LoadReport struct {
	Format     string // "csv", "jsonl" or "gridftp"
	Lines      int    // input lines read (CSV: records, including the header)
	Parsed     int    // transfers produced
	Blank      int    // empty lines (JSONL, gridftp)
	OtherEvent int    // gridftp: records whose NL.EVNT is not FTP_INFO
	FailedCode int    // gridftp: FTP_INFO records with CODE other than 226
	OtherType  int    // gridftp: TYPE other than RETR/STOR/ERET/ESTO (e.g. LIST)
	// NonTransfer counts the server log's messages other than
	// "Transfer stats:" records ("[pid] date :: Server started ..."),
	// which are not transfers and were skipped.
	NonTransfer int
	Malformed   int // lines that could not be parsed and were skipped
	// Duplicate counts records that repeat an earlier one exactly
	// (overlapping rotated logs), dropped rather than replayed twice.
	Duplicate int
	// Outlier counts records whose START lies far from the rest of the
	// log (a wrong clock or a corrupt record), skipped so that one of
	// them cannot shift every other arrival by years.
	Outlier int
	// FirstMalformed is the line number of the first malformed line, 0 if
	// none.
	FirstMalformed int
	// Renumbered is set when input IDs were absent or not unique and the
	// transfers were numbered 0..n-1 in arrival order instead.
	Renumbered bool
	// Origin is the wall-clock time of arrival 0 (gridftp: the earliest
	// START); zero for formats without absolute times.
	Origin time.Time
	// Warnings describes up to MaxWarnings skipped lines, "line N: why",
	// the first ones by line number.
	Warnings  []string
	warnLines []int
	// Empty counts the transfers of 0 bytes (empty files), which are
	// kept: they cost a start-up like any other (ReadFile only).
	Empty int
	// Remapped counts the transfers that named an endpoint the replay's
	// testbed lacks, which Remap put on the testbed's own endpoints, and
	// Unknown lists up to MaxWarnings of those names (set by whoever
	// remaps, such as the simulator's trace loading).
	Remapped int
	Unknown  []string
}

// Skipped is how many input lines other than blank ones did not become a
// transfer.
func (r *LoadReport) Skipped() int {
	return r.OtherEvent + r.FailedCode + r.OtherType + r.NonTransfer + r.Malformed + r.Duplicate + r.Outlier
}

// String says in one line what the loader read and what it left out and
// why, for a user replaying their own logs.
func (r *LoadReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d lines, %d transfers", r.Format, r.Lines, r.Parsed)
	if r.Empty > 0 {
		fmt.Fprintf(&b, " (%d of 0 bytes, kept: empty files are copied too)", r.Empty)
	}
	if r.Remapped > 0 {
		fmt.Fprintf(&b, "; %d name endpoints the testbed lacks (%s), mapped onto its source and, by capacity, its destinations",
			r.Remapped, strings.Join(r.Unknown, ", "))
	}
	if r.Skipped() == 0 {
		return b.String()
	}
	var why []string
	for _, c := range []struct {
		n    int
		what string
	}{
		{r.FailedCode, "failed (CODE other than 226)"},
		{r.OtherEvent, "not transfer records (NL.EVNT other than FTP_INFO)"},
		{r.OtherType, "not data transfers (TYPE such as LIST)"},
		{r.NonTransfer, "other server-log messages (not \"Transfer stats:\")"},
		{r.Malformed, "malformed"},
		{r.Duplicate, "exact duplicates of earlier records (overlapping logs?)"},
		{r.Outlier, "with a START far from the rest of the log (wrong clock?)"},
	} {
		if c.n > 0 {
			why = append(why, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	fmt.Fprintf(&b, "; skipped %s", strings.Join(why, ", "))
	if len(r.Warnings) > 0 {
		fmt.Fprintf(&b, "; first: %s", r.Warnings[0])
	}
	return b.String()
}

// warn describes a skipped line, keeping the MaxWarnings first by line
// number (checks made after reading, such as duplicates, come late).
func (r *LoadReport) warn(line int, err error) {
	if len(r.Warnings) >= MaxWarnings && line >= r.warnLines[len(r.warnLines)-1] {
		return
	}
	i, _ := slices.BinarySearch(r.warnLines, line+1) // after equal lines
	r.warnLines = slices.Insert(r.warnLines, i, line)
	r.Warnings = slices.Insert(r.Warnings, i, fmt.Sprintf("line %d: %v", line, err))
	if len(r.Warnings) > MaxWarnings {
		r.warnLines, r.Warnings = r.warnLines[:MaxWarnings], r.Warnings[:MaxWarnings]
	}
}

// Read loads a trace from a file. format is "csv", "jsonl", "gridftp", or ""
// to guess from the extension (.csv; .jsonl, .ndjson, .json; .log) and, if
// that does not decide, from the first non-blank line. Gzip- and
// bzip2-compressed files (as rotated server logs usually are) are
// decompressed transparently; xz, zstd and lz4 ones are refused by name. The
// trace is named after the file. Use ReadFile to also get the LoadReport.
func Read(path string, format string) (*Trace, error) {
	t, _, err := ReadFile(path, format)
	return t, err
}

// ReadFile is Read that also returns what the loader skipped. Line-level
// errors are *ParseError values carrying path.
func ReadFile(path string, format string) (*Trace, *LoadReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, nil, fmt.Errorf("trace: %s is a directory, not a trace file", path)
	}
	br := bufio.NewReader(f)
	var r io.Reader = br
	name := filepath.Base(path)
	magic, _ := br.Peek(6)
	switch {
	case len(magic) >= 4 && string(magic[:3]) == "BZh" && magic[3] >= '1' && magic[3] <= '9':
		// logrotate sites that set compresscmd to bzip2.
		br = bufio.NewReader(truncReader{bzip2.NewReader(br)})
		r = br
		name = strings.TrimSuffix(name, ".bz2")
		path += " (bzip2-compressed)"
	case bytes.HasPrefix(magic, []byte("\xfd7zXZ\x00")), bytes.HasPrefix(magic, []byte("\x28\xb5\x2f\xfd")),
		bytes.HasPrefix(magic, []byte("\x04\x22\x4d\x18")):
		// Read as text these fail as an unknown format or as all lines
		// malformed, which hides the reason.
		tool := map[byte]string{0xfd: "xz", 0x28: "zstd", 0x04: "lz4"}[magic[0]]
		return nil, nil, fmt.Errorf("trace: %s is compressed with %s, which is not read directly; decompress it first (%s -d), or recompress it with gzip",
			path, tool, tool)
	}
	if len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("trace: %s: %w", path, err)
		}
		defer zr.Close()
		br = bufio.NewReader(truncReader{zr})
		r = br
		name = strings.TrimSuffix(name, ".gz")
		path += " (gzip-compressed)" // a corrupt archive reads as a truncated file
	}
	skipBOM(br) // before sniffing: "\ufeff{" is still JSONL
	ext := strings.ToLower(filepath.Ext(name))
	if format == "" {
		format = formatByExt(ext)
		// A rotated log ("transfer.log.1"): the extension before the
		// rotation number.
		if r := strings.TrimPrefix(ext, "."); format == "" && r != "" && allDigits(r) {
			format = formatByExt(strings.ToLower(filepath.Ext(strings.TrimSuffix(name, filepath.Ext(name)))))
		}
	}
	if format == "" {
		head, _ := br.Peek(sniffBytes)
		format = sniffFormat(head)
	}
	if format == "" {
		return nil, nil, fmt.Errorf("trace: %s: cannot tell the format from the name or the first %d bytes; "+
			"give it with --format csv, jsonl or gridftp", path, sniffBytes)
	}
	var (
		t   *Trace
		rep *LoadReport
	)
	switch strings.ToLower(format) {
	case "csv":
		t, rep, err = readCSV(r)
	case "jsonl", "json", "ndjson":
		t, rep, err = readJSONL(r)
	case "gridftp", "log":
		t, rep, err = ReadGridFTPLog(r)
	default:
		return nil, nil, fmt.Errorf("trace: %s: unknown format %q; want csv, jsonl or gridftp", path, format)
	}
	if err != nil {
		if pe, ok := errors.AsType[*ParseError](err); ok {
			pe.Path = path
			return nil, rep, pe
		}
		return nil, rep, fmt.Errorf("%s: %w", path, err)
	}
	// The name without its extension; a numeric one is not an extension
	// ("0.3", a rotated "transfer.log.1").
	t.Name = name
	if r := strings.TrimPrefix(ext, "."); !allDigits(r) {
		t.Name = strings.TrimSuffix(name, ext)
	}
	var total int64
	for _, x := range t.Transfers {
		if x.Size == 0 {
			rep.Empty++
		}
		if total > math.MaxInt64-x.Size {
			return nil, rep, fmt.Errorf("%s: the transfers add up to more than %d bytes", path, int64(math.MaxInt64))
		}
		total += x.Size
	}
	return t, rep, nil
}

// errTruncated is what a compressed input that stops mid-stream reads as:
// the decompressor's bare "unexpected EOF" does not say that the archive
// was cut off (copied while being written, a partial download).
var errTruncated = errors.New("the compressed data ends early (a truncated archive?)")

// truncReader turns io.ErrUnexpectedEOF from a decompressor into
// errTruncated.
type truncReader struct{ r io.Reader }

func (t truncReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = errTruncated
	}
	return n, err
}

// skipBOM drops a UTF-8 byte order mark at the start of br, which
// Windows tools (PowerShell 5's Out-File, Notepad) write: left in, it
// hides the first line's opening "{" or first key.
func skipBOM(br *bufio.Reader) {
	if b, _ := br.Peek(3); string(b) == "\ufeff" {
		br.Discard(3)
	}
}

func formatByExt(ext string) string {
	switch ext {
	case ".csv":
		return "csv"
	case ".jsonl", ".ndjson", ".json":
		return "jsonl"
	case ".log":
		return "gridftp"
	}
	return ""
}

// sniffBytes is how much of a file sniffFormat looks at.
const sniffBytes = 4096

// sniffFormat guesses the format from the start of the content: the first
// line that says (a JSON object, a transfer-log record, a CSV header with
// an arrival column) decides, so that a server log opening with messages
// other than transfer records ("Server started ...") is still recognised.
// A line cut off by the end of head is not judged.
func sniffFormat(head []byte) string {
	if len(head) >= sniffBytes {
		if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
			head = head[:i+1]
		}
	}
	for line := range bytes.Lines(head) {
		s := strings.TrimSpace(string(line))
		switch {
		case s == "":
		case strings.HasPrefix(s, "{"):
			return "jsonl"
		case strings.Contains(s, "NL.EVNT=") || strings.HasPrefix(s, "DATE="):
			return "gridftp"
		case strings.Contains(strings.ToLower(s), "arrival") && strings.Contains(s, ","):
			return "csv"
		}
	}
	return ""
}

// parseArrival parses seconds since the trace start.
func parseArrival(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("arrival %q: %w", s, numErr(err))
	}
	if err := checkArrival(v); err != nil {
		return 0, fmt.Errorf("arrival %q: %w", s, err)
	}
	return v, nil
}

func checkArrival(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return errors.New("not a finite number")
	}
	if v < 0 {
		return errors.New("negative")
	}
	if v > MaxArrival {
		return fmt.Errorf("more than %g s (%.1f years), the longest a replay may span", float64(MaxArrival), MaxArrival/secondsPerYear)
	}
	return nil
}

// MaxArrival is the latest arrival a trace may hold, in seconds from its
// start (about 31.7 years): the simulator replays up to it (sim.MaxArrival
// is this limit), and far beyond it a float64 clock cannot tell a
// completion from the present.
const MaxArrival = 1e9

// parseSize parses a byte count. Integral floats ("2.7e9") are accepted
// because spreadsheet and dataframe exports write large integers that way.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		switch {
		case ferr != nil || math.IsNaN(f) || f != math.Trunc(f):
			return 0, fmt.Errorf("size %q: %w", s, numErr(err))
		case f > MaxSize:
			return 0, fmt.Errorf("size %q: more than %g bytes (1 EB), the largest transfer a trace may hold", s, float64(MaxSize))
		}
		v = int64(f)
	}
	if v < 0 {
		return 0, fmt.Errorf("size %q: negative", s)
	}
	if v > MaxSize {
		return 0, fmt.Errorf("size %q: more than %g bytes (1 EB), the largest transfer a trace may hold", s, float64(MaxSize))
	}
	return v, nil
}

// MaxSize is the largest transfer a trace file may hold, 10^18 bytes (1 EB):
// far beyond any file, and small enough that millions of them sum without
// overflow in the volume counts.
const MaxSize = 1_000_000_000_000_000_000

// numErr strips strconv's "strconv.ParseInt: parsing ...:" prefix, which
// repeats the value the caller already quotes.
func numErr(err error) error {
	if ne, ok := errors.AsType[*strconv.NumError](err); ok {
		return ne.Err
	}
	return err
}

// finish establishes the Trace order: with unique input IDs, sort by
// (arrival, ID) and keep them; otherwise sort stably by arrival, so ties
// keep input order, and renumber. It reports whether it renumbered.
func finish(ts []Transfer, haveIDs bool) (renumbered bool) {
	if haveIDs {
		seen := make(map[int64]struct{}, len(ts))
		for _, x := range ts {
			if _, dup := seen[x.ID]; dup {
				haveIDs = false
				break
			}
			seen[x.ID] = struct{}{}
		}
	}
	if haveIDs {
		slices.SortStableFunc(ts, compareTransfers)
		return false
	}
	sortByArrivalRenumber(ts)
	return true
}
