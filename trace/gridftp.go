package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// gridftpKeys are the fields of a globus-gridftp-server transfer-log record
// in the order the server writes them (globus_i_gfs_log_transfer); recent
// servers append TASKID and, optionally, retrans.
var gridftpKeys = [...]string{
	"DATE", "HOST", "PROG", "NL.EVNT", "START", "USER", "FILE", "BUFFER", "BLOCK",
	"NBYTES", "VOLUME", "STREAMS", "STRIPES", "DEST", "TYPE", "CODE", "TASKID", "retrans",
}

// gridftpRequired are the fields a transfer needs; the others are ignored.
var gridftpRequired = [...]string{"HOST", "NL.EVNT", "START", "NBYTES", "DEST", "TYPE", "CODE"}

// gridftpFreeText are the fields whose values may contain spaces (paths).
var gridftpFreeText = [...]string{"FILE", "VOLUME"}

// lineKind classifies one log line.
type lineKind int

const (
	kindTransfer lineKind = iota
	kindBlank
	kindOtherEvent
	kindFailedCode
	kindOtherType
	kindMalformed
)

type gridftpRecord struct {
	start    time.Time
	src, dst string
	size     int64
	path     string
}

// ReadGridFTPLog reads a globus-gridftp-server transfer log (the
// "-log-transfer" file, or "Transfer stats:" lines of the server log) and
// returns one transfer per successful data transfer record:
//
//   - Only NL.EVNT=FTP_INFO records with CODE=226 are transfers; other
//     codes (failed or aborted transfers) and events are counted and
//     skipped, as are non-data TYPEs such as LIST.
//   - Arrival is START (UTC) relative to the earliest START in the log,
//     which LoadReport.Origin records; Size is NBYTES; Path is FILE.
//   - TYPE=RETR (and ERET) means the server HOST sent to the peer, so
//     Src=HOST and Dst=the DEST address; STOR (and ESTO) is the reverse.
//     For a striped DEST list the first address is used.
//
// FILE may contain spaces, so a value runs until the next " KEY=" of a
// known key. Malformed lines are skipped and described in the report; the
// read fails, naming the first bad line, only if no transfer could be read.
// The result is sorted by arrival and numbered 0..n-1 in that order (the log
// itself is ordered by completion time, DATE).
func ReadGridFTPLog(r io.Reader) (*Trace, *LoadReport, error) {
	rep := &LoadReport{Format: "gridftp", Renumbered: true}
	br := bufio.NewReader(r)
	var (
		recs     []gridftpRecord
		firstErr error
	)
	for line := 1; ; line++ {
		s, rerr := br.ReadString('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, rep, fmt.Errorf("gridftp log: %w", rerr)
		}
		if s == "" && rerr == io.EOF {
			break
		}
		rep.Lines++
		rec, kind, err := parseGridFTPLine(s)
		switch kind {
		case kindTransfer:
			recs = append(recs, rec)
		case kindBlank:
			rep.Blank++
		case kindOtherEvent:
			rep.OtherEvent++
		case kindFailedCode:
			rep.FailedCode++
		case kindOtherType:
			rep.OtherType++
		case kindMalformed:
			rep.Malformed++
			rep.warn(line, err)
			if rep.FirstMalformed == 0 {
				rep.FirstMalformed, firstErr = line, err
			}
		}
		if rerr == io.EOF {
			break
		}
	}
	if len(recs) == 0 {
		switch {
		case rep.FirstMalformed > 0:
			return nil, rep, &ParseError{Line: rep.FirstMalformed, Err: fmt.Errorf(
				"%w (no transfer parsed; %d of %d lines malformed)", firstErr, rep.Malformed, rep.Lines)}
		case rep.Lines == rep.Blank:
			return nil, rep, errors.New("gridftp log: empty input")
		default:
			return nil, rep, fmt.Errorf("gridftp log: no successful transfer in %d lines "+
				"(%d with CODE other than 226, %d other events, %d non-data types)",
				rep.Lines, rep.FailedCode, rep.OtherEvent, rep.OtherType)
		}
	}

	origin := recs[0].start
	for _, rc := range recs[1:] {
		if rc.start.Before(origin) {
			origin = rc.start
		}
	}
	rep.Origin = origin
	ts := make([]Transfer, len(recs))
	for i, rc := range recs {
		// Whole seconds and nanoseconds separately: time.Sub saturates
		// beyond ~292 years, which a corrupt timestamp can reach.
		d := float64(rc.start.Unix()-origin.Unix()) + float64(rc.start.Nanosecond()-origin.Nanosecond())/1e9
		ts[i] = Transfer{Arrival: roundMicro(d), Src: rc.src, Dst: rc.dst, Size: rc.size, Path: rc.path}
	}
	sortByArrivalRenumber(ts)
	rep.Parsed = len(ts)
	return &Trace{Transfers: ts}, rep, nil
}

// parseGridFTPLine classifies and parses one line.
func parseGridFTPLine(line string) (gridftpRecord, lineKind, error) {
	var rec gridftpRecord
	line = strings.TrimRight(line, "\r\n")
	if strings.TrimSpace(line) == "" {
		return rec, kindBlank, nil
	}
	f := splitGridFTPFields(line)
	ev, ok := f["NL.EVNT"]
	if !ok {
		return rec, kindMalformed, errors.New("no NL.EVNT field: not a transfer-log record")
	}
	if ev != "FTP_INFO" {
		return rec, kindOtherEvent, nil
	}
	for _, k := range gridftpRequired {
		if _, ok := f[k]; !ok {
			return rec, kindMalformed, fmt.Errorf("missing %s", k)
		}
	}
	code, err := strconv.Atoi(f["CODE"])
	if err != nil {
		return rec, kindMalformed, fmt.Errorf("CODE %q: %w", f["CODE"], numErr(err))
	}
	if code != 226 {
		return rec, kindFailedCode, nil
	}
	var send bool
	switch f["TYPE"] {
	case "RETR", "ERET":
		send = true
	case "STOR", "ESTO":
	case "":
		return rec, kindMalformed, errors.New("empty TYPE")
	default:
		return rec, kindOtherType, nil
	}
	if rec.start, err = parseGridFTPTime(f["START"]); err != nil {
		return rec, kindMalformed, fmt.Errorf("START %q: %w", f["START"], err)
	}
	// DATE is when the record was written, at the transfer's end, by the
	// same clock: a START after it is a corrupt record, whose arrival
	// would be wrong.
	if d := f["DATE"]; d != "" {
		date, err := parseGridFTPTime(d)
		if err != nil {
			return rec, kindMalformed, fmt.Errorf("DATE %q: %w", d, err)
		}
		if rec.start.After(date) {
			return rec, kindMalformed, fmt.Errorf("START %s is after DATE %s: the transfer would end before it began", f["START"], d)
		}
	}
	if rec.size, err = parseSize(f["NBYTES"]); err != nil {
		return rec, kindMalformed, fmt.Errorf("NBYTES: %w", err)
	}
	host := f["HOST"]
	if host == "" {
		return rec, kindMalformed, errors.New("empty HOST")
	}
	peer, err := parseGridFTPDest(f["DEST"])
	if err != nil {
		return rec, kindMalformed, fmt.Errorf("DEST %q: %w", f["DEST"], err)
	}
	if send {
		rec.src, rec.dst = host, peer
	} else {
		rec.src, rec.dst = peer, host
	}
	rec.path = f["FILE"]
	return rec, kindTransfer, nil
}

// splitGridFTPFields splits a record into its known KEY=value fields. A key
// starts at the beginning of the line or after a blank. Keys are matched in
// the server's order first, so that a path containing, say, " USER=" does
// not end FILE early; if that misses a required key (a writer with another
// order), the first occurrence of each key is used instead. Text before the
// first key (a server-log prefix such as "[pid] date :: Transfer stats: ")
// is ignored. Free-text fields (FILE, VOLUME) run to the next key; other
// fields are their first word, so unknown trailing key=value pairs do not
// corrupt, say, CODE.
func splitGridFTPFields(line string) map[string]string {
	type cand struct{ key, pos int }
	var cands []cand
	for i := 0; i < len(line); i++ {
		if i > 0 && line[i-1] != ' ' && line[i-1] != '\t' {
			continue
		}
		for k, key := range gridftpKeys {
			if strings.HasPrefix(line[i:], key) && len(line) > i+len(key) && line[i+len(key)] == '=' {
				cands = append(cands, cand{k, i})
			}
		}
	}
	pick := func(ordered bool) []cand {
		var out []cand
		last := -1
		for k := range gridftpKeys {
			for _, c := range cands {
				if c.key == k && (!ordered || c.pos > last) {
					out = append(out, c)
					last = c.pos
					break
				}
			}
		}
		slices.SortFunc(out, func(a, b cand) int { return a.pos - b.pos })
		return out
	}
	hasRequired := func(cs []cand) bool {
		for _, req := range gridftpRequired {
			if !slices.ContainsFunc(cs, func(c cand) bool { return gridftpKeys[c.key] == req }) {
				return false
			}
		}
		return true
	}
	chosen := pick(true)
	if !hasRequired(chosen) {
		if all := pick(false); hasRequired(all) {
			chosen = all
		}
	}
	out := make(map[string]string, len(chosen))
	for i, c := range chosen {
		key := gridftpKeys[c.key]
		end := len(line)
		if i+1 < len(chosen) {
			end = chosen[i+1].pos
		}
		start := c.pos + len(key) + 1
		if start > end { // overlapping matches in a degenerate line
			start = end
		}
		v := strings.TrimRight(line[start:end], " \t")
		if !slices.Contains(gridftpFreeText[:], key) {
			if fs := strings.Fields(v); len(fs) > 0 {
				v = fs[0]
			} else {
				v = ""
			}
		}
		out[key] = v
	}
	return out
}

// parseGridFTPTime parses YYYYmmddHHMMSS[.frac] in UTC (the server formats
// with gmtime). A fraction of up to six digits is read as a count of
// microseconds, not as a decimal fraction: old servers printed tv_usec with
// "%d" rather than "%06d" (".2102" meant 2102 us), and for the six-digit
// fractions of current servers both readings agree.
func parseGridFTPTime(s string) (time.Time, error) {
	whole, frac, hasFrac := strings.Cut(s, ".")
	if len(whole) != 14 || !allDigits(whole) {
		return time.Time{}, errors.New("want YYYYmmddHHMMSS.ffffff")
	}
	t, err := time.Parse("20060102150405", whole)
	if err != nil {
		return time.Time{}, errors.New("not a valid date and time")
	}
	if !hasFrac {
		return t, nil
	}
	if frac == "" || len(frac) > 9 || !allDigits(frac) {
		return time.Time{}, errors.New("bad fractional seconds")
	}
	n, _ := strconv.Atoi(frac) // all digits, at most 9: cannot fail
	if len(frac) <= 6 {
		return t.Add(time.Duration(n) * time.Microsecond), nil
	}
	for range 9 - len(frac) {
		n *= 10
	}
	return t.Add(time.Duration(n)), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseGridFTPDest extracts the peer address from DEST, written "[ip]" by
// current servers, "1[ip]" (a count prefix) by old ones, and "[ip1,ip2]"
// for striped transfers, of which the first is used.
func parseGridFTPDest(v string) (string, error) {
	if i := strings.IndexByte(v, '['); i >= 0 {
		inner, ok := strings.CutSuffix(v[i+1:], "]")
		if !ok {
			return "", errors.New("unterminated [")
		}
		v = inner
	}
	first, _, _ := strings.Cut(v, ",")
	first = strings.TrimSpace(first)
	if first == "" {
		return "", errors.New("no address")
	}
	return first, nil
}
