package trace

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"net/netip"
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

// Indices into gridftpKeys of the fields the loader reads.
const (
	keyDATE = iota
	keyHOST
	keyPROG
	keyNLEVNT
	keySTART
	keyUSER
	keyFILE
	keyBUFFER
	keyBLOCK
	keyNBYTES
	keyVOLUME
	keySTREAMS
	keySTRIPES
	keyDEST
	keyTYPE
	keyCODE
	keyTASKID
	keyRetrans
	numGridFTPKeys
)

// gridftpRequired are the fields a transfer needs; the others are ignored.
var gridftpRequired = [...]int{keyHOST, keyNLEVNT, keySTART, keyNBYTES, keyDEST, keyTYPE, keyCODE}

// gridftpOnce are the fields a record has exactly once and a file path is
// not expected to contain as " KEY=": seeing one of them twice means two
// records share the line (a writer crashed mid-record and the next record
// was appended to the torn one), which must not be merged into one
// transfer. USER, FILE, VOLUME and the tuning fields may repeat inside a
// path ("/x USER=y").
var gridftpOnce = [...]int{keyDATE, keyHOST, keyPROG, keyNLEVNT, keySTART, keyNBYTES, keyDEST, keyTYPE, keyCODE}

// lineKind classifies one log line.
type lineKind int

const (
	kindTransfer lineKind = iota
	kindBlank
	kindOtherEvent
	kindFailedCode
	kindOtherType
	kindMalformed
	kindNonTransfer // a server-log message other than "Transfer stats:"
)

// gridftpRecord is one parsed transfer. Its strings never point into the
// line they were read from (hosts are interned, paths cloned), so a loaded
// log keeps only what it uses, not every line.
type gridftpRecord struct {
	x Transfer // without Arrival, which needs the whole log's origin
	m gridftpMeta
}

// gridftpMeta is what the loader keeps of a record besides its Transfer
// until the log is read: START as seconds and nanoseconds (smaller than a
// time.Time), the line, and a hash of the record's text to find exact
// duplicates.
type gridftpMeta struct {
	sec  int64 // START, Unix seconds
	nsec int32
	line int32 // input line number; 0 marks a record to drop
	hash uint64
}

// gridftpRecs are the records read so far, in input order, as two
// parallel slices: the Transfers the trace will hold and what is needed
// only while loading.
type gridftpRecs struct {
	ts   []Transfer
	meta []gridftpMeta
}

// drop removes the records whose line is 0, keeping the order.
func (r *gridftpRecs) drop() {
	n := 0
	for i := range r.ts {
		if r.meta[i].line != 0 {
			r.ts[n], r.meta[n] = r.ts[i], r.meta[i]
			n++
		}
	}
	clear(r.ts[n:]) // release the dropped records' strings
	r.ts, r.meta = r.ts[:n], r.meta[:n]
}

// maxInterned bounds the host-name table: a log names few hosts, and one
// naming millions gains nothing from it.
const maxInterned = 1 << 16

// gridftpReader is the state of one ReadGridFTPLog call.
type gridftpReader struct {
	seed   maphash.Seed
	intern map[string]string // as written -> the endpoint's name
	// names is each machine's endpoint name, by canonHost: the first
	// way the log wrote it (without brackets), so that a testbed
	// written with the log's names still matches them.
	names map[string]string
}

func newGridFTPReader() *gridftpReader {
	return &gridftpReader{seed: maphash.MakeSeed(), intern: map[string]string{}, names: map[string]string{}}
}

// host returns s, or an equal string already held, without keeping the
// line s points into.
func (g *gridftpReader) host(s string) string {
	if v, ok := g.intern[s]; ok {
		return v
	}
	key, bare := canonHost(s)
	c, ok := g.names[key]
	if !ok {
		c = strings.Clone(bare)
		if len(g.names) < maxInterned {
			g.names[key] = c
		}
	}
	if len(g.intern) < maxInterned {
		g.intern[strings.Clone(s)] = c
	}
	return c
}

// canonHost returns the key of the machine a log names by s, and s without
// brackets. A log (above all, logs merged from several servers) may write
// one machine several ways: an IPv6 address with or without brackets, in
// any case or abbreviation, an IPv4 address mapped into IPv6, a host name
// in any case (DNS names are case-insensitive). They have one key, and so
// are one endpoint.
func canonHost(s string) (key, bare string) {
	s = strings.TrimSpace(s)
	if inner, ok := strings.CutPrefix(s, "["); ok {
		s = strings.TrimSuffix(inner, "]")
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().String(), s
	}
	return strings.ToLower(s), s
}

// ReadGridFTPLog reads a globus-gridftp-server transfer log (the
// "-log-transfer" file, or "Transfer stats:" lines of the server log) and
// returns one transfer per successful data transfer record:
//
//   - Only NL.EVNT=FTP_INFO records with CODE=226 are transfers; other
//     codes (failed or aborted transfers) and events are counted and
//     skipped, as are non-data TYPEs such as LIST, and the server log's
//     other messages ("[pid] date :: Server started ...").
//   - Arrival is START (UTC) relative to the earliest START in the log,
//     which LoadReport.Origin records; Size is NBYTES; Path is FILE.
//   - TYPE=RETR (and ERET) means the server HOST sent to the peer, so
//     Src=HOST and Dst=the DEST address; STOR (and ESTO) is the reverse.
//     For a striped DEST list the first address is used.
//   - A record that repeats one already read word for word (overlapping
//     rotated logs read together) is counted in LoadReport.Duplicate and
//     dropped, not replayed twice.
//   - A record whose START lies far from the rest of the log (a wrong
//     clock or a corrupt record: see outlierStarts) is counted in
//     LoadReport.Outlier and skipped, so that it cannot become arrival 0
//     and push every other transfer decades later. If what remains still
//     spans more than MaxArrival, the read fails naming the line.
//
// FILE may contain spaces, so a value runs until the next " KEY=" of a
// known key. Malformed lines (including torn records: two records on one
// line) are skipped and described in the report; the read fails, naming
// the first bad line, only if no transfer could be read. The result is
// sorted by arrival and numbered 0..n-1 in that order (the log itself is
// ordered by completion time, DATE).
func ReadGridFTPLog(r io.Reader) (*Trace, *LoadReport, error) {
	rep := &LoadReport{Format: "gridftp", Renumbered: true}
	br := bufio.NewReader(r)
	skipBOM(br)
	g := newGridFTPReader()
	var (
		recs     gridftpRecs
		firstErr error
	)
	for line := 1; ; line++ {
		s, rerr := br.ReadString('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, rep, &ParseError{Line: line, Err: fmt.Errorf("gridftp log: reading: %w", rerr)}
		}
		if s == "" && rerr == io.EOF {
			break
		}
		rep.Lines++
		g.parseRecords(s, func(rec gridftpRecord, kind lineKind, err error) {
			switch kind {
			case kindTransfer:
				rec.m.line = int32(min(line, math.MaxInt32))
				recs.ts = append(recs.ts, rec.x)
				recs.meta = append(recs.meta, rec.m)
			case kindBlank:
				rep.Blank++
			case kindOtherEvent:
				rep.OtherEvent++
			case kindFailedCode:
				rep.FailedCode++
			case kindOtherType:
				rep.OtherType++
			case kindNonTransfer:
				rep.NonTransfer++
			case kindMalformed:
				rep.Malformed++
				rep.warn(line, err)
				if rep.FirstMalformed == 0 {
					rep.FirstMalformed, firstErr = line, err
				}
			}
		})
		if rerr == io.EOF {
			break
		}
	}
	if len(recs.ts) == 0 {
		switch {
		case rep.FirstMalformed > 0:
			return nil, rep, &ParseError{Line: rep.FirstMalformed, Err: fmt.Errorf(
				"%w (no transfer parsed; %d of %d lines malformed)", firstErr, rep.Malformed, rep.Lines)}
		case rep.Lines == rep.Blank:
			return nil, rep, errors.New("gridftp log: empty input")
		default:
			return nil, rep, fmt.Errorf("gridftp log: no successful transfer in %d lines "+
				"(%d with CODE other than 226, %d other events, %d non-data types, %d other server-log messages)",
				rep.Lines, rep.FailedCode, rep.OtherEvent, rep.OtherType, rep.NonTransfer)
		}
	}
	recs.dropDuplicates(rep)
	recs.dropOutliers(rep)

	meta := recs.meta
	origin := meta[0]
	for _, m := range meta[1:] {
		if m.sec < origin.sec || m.sec == origin.sec && m.nsec < origin.nsec {
			origin = m
		}
	}
	rep.Origin = time.Unix(origin.sec, int64(origin.nsec)).UTC()
	ts := recs.ts
	for i, m := range meta {
		// Whole seconds and nanoseconds separately: time.Sub saturates
		// beyond ~292 years, which a corrupt timestamp can reach.
		d := float64(m.sec-origin.sec) + float64(m.nsec-origin.nsec)/1e9
		if d > MaxArrival {
			return nil, rep, &ParseError{Line: int(m.line), Err: fmt.Errorf(
				"START %s is %.1f years after the earliest START (%s, line %d), beyond the %g s (%.1f years) a replay may span; "+
					"split the log, or remove the records of the wrong period",
				time.Unix(m.sec, int64(m.nsec)).UTC().Format(time.RFC3339), d/secondsPerYear,
				rep.Origin.Format(time.RFC3339), origin.line, float64(MaxArrival), MaxArrival/secondsPerYear)}
		}
		ts[i].Arrival = roundMicro(d)
	}
	recs.meta = nil
	sortByArrivalRenumber(ts)
	rep.Parsed = len(ts)
	return &Trace{Transfers: slices.Clip(ts)}, rep, nil
}

const secondsPerYear = 365.25 * 86400

// dropDuplicates removes records that repeat an earlier one exactly (same
// record text: equal hash and equal parsed fields), counting and
// describing them in rep. The others keep their input order.
func (r *gridftpRecs) dropDuplicates(rep *LoadReport) {
	meta := r.meta
	idx := make([]int32, len(meta))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		x, y := &meta[a], &meta[b]
		return cmp.Or(cmp.Compare(x.sec, y.sec), cmp.Compare(x.nsec, y.nsec), cmp.Compare(x.hash, y.hash), cmp.Compare(a, b))
	})
	dups := 0
	for i := 1; i < len(idx); i++ {
		x := &meta[idx[i]]
		// Walk back over the run of equal (START, hash): it is almost
		// always one record long.
		for j := i - 1; j >= 0; j-- {
			y := &meta[idx[j]]
			if y.sec != x.sec || y.nsec != x.nsec || y.hash != x.hash {
				break
			}
			if y.line != 0 && r.ts[idx[i]] == r.ts[idx[j]] {
				rep.warn(int(x.line), fmt.Errorf("repeats line %d exactly (overlapping logs?); dropped", y.line))
				x.line = 0
				dups++
				break
			}
		}
	}
	if dups > 0 {
		rep.Duplicate = dups
		r.drop()
	}
}

// Outlier detection: a START is far from the rest of the log when it lies
// more than outlierFactor interquartile ranges of START, and at least
// outlierMinGap, outside the middle half of the log. The floor keeps
// transfers that legitimately started days before the log's others (a
// long transfer is logged when it ends); the factor keeps logs whose
// records spread over months or years.
const (
	outlierFactor = 10
	outlierMinGap = 30 * 86400 // seconds
)

// dropOutliers removes the records whose START is far from the bulk of
// the log, counting and describing them in rep.
func (r *gridftpRecs) dropOutliers(rep *LoadReport) {
	if len(r.meta) < 3 {
		return
	}
	secs := make([]int64, len(r.meta))
	for i, m := range r.meta {
		secs[i] = m.sec
	}
	slices.Sort(secs)
	q1, q3 := secs[(len(secs)-1)/4], secs[3*(len(secs)-1)/4]
	gap := max(outlierFactor*float64(q3-q1), outlierMinGap)
	lo, hi := float64(q1)-gap, float64(q3)+gap
	if float64(secs[0]) >= lo && float64(secs[len(secs)-1]) <= hi {
		return
	}
	day := func(s int64) string { return time.Unix(s, 0).UTC().Format("2006-01-02") }
	for i := range r.meta {
		m := &r.meta[i]
		at := float64(m.sec)
		if at >= lo && at <= hi {
			continue
		}
		side, d := "before", float64(q1)-at
		if at > hi {
			side, d = "after", at-float64(q3)
		}
		rep.warn(int(m.line), fmt.Errorf("START %s is %s %s the bulk of the log (the middle half of its STARTs is %s to %s): "+
			"a wrong clock or a corrupt record; skipped", time.Unix(m.sec, int64(m.nsec)).UTC().Format(time.RFC3339),
			span(d), side, day(q1), day(q3)))
		m.line = 0
		rep.Outlier++
	}
	r.drop()
}

// span says how long d seconds is, in days or years.
func span(d float64) string {
	if d >= 2*secondsPerYear {
		return fmt.Sprintf("%.1f years", d/secondsPerYear)
	}
	return fmt.Sprintf("%.0f days", d/86400)
}

// errTorn marks a line on which a key that a record has once appears
// twice: two records on one line.
var errTorn = errors.New("two records on one line (a torn record, the writer interrupted mid-line?)")

// parseRecords parses one line and passes each record on it to emit: one
// record, or, for a torn line, each record glued into it. The server
// writes a record with snprintf into a 4 KiB buffer and no newline when it
// is cut there (a long FILE), so the next record follows on the same line;
// a crashed writer leaves the same. The records after a cut start with
// their DATE and are complete, so they are read, and only the cut one is
// malformed; a line with a key repeated otherwise stays malformed whole.
func (g *gridftpReader) parseRecords(line string, emit func(gridftpRecord, lineKind, error)) {
	rec, kind, err := g.parseLine(line)
	if kind != kindMalformed || !errors.Is(err, errTorn) {
		emit(rec, kind, err)
		return
	}
	at := lastRecordStart(line)
	if at < 0 {
		emit(rec, kind, err)
		return
	}
	tail, tkind, terr := g.parseLine(line[at:])
	if tkind == kindMalformed {
		// No complete record there after all (a path holding
		// "DATE=..."?): the line stays malformed as a whole.
		emit(rec, kind, err)
		return
	}
	// The head may hold further glued records.
	g.parseRecords(line[:at], func(r gridftpRecord, k lineKind, e error) {
		if k == kindMalformed {
			e = fmt.Errorf("a record cut off where the record at byte %d begins (read on its own): %w", at, e)
		}
		emit(r, k, e)
	})
	emit(tail, tkind, terr)
}

// lastRecordStart returns where the last record glued into a torn line
// begins: the last "DATE=" with a time after the first record's start, or
// -1 if there is none. The glued DATE need not follow a blank (the cut
// record left none), which is why it is looked for here and not by
// splitGridFTPFields.
func lastRecordStart(line string) int {
	first := splitGridFTPFields(line).first
	for end := len(line); ; {
		i := strings.LastIndex(line[:end], "DATE=")
		if i <= first {
			return -1
		}
		v := line[i+len("DATE="):]
		if len(v) >= 14 && allDigits(v[:14]) {
			return i
		}
		end = i
	}
}

// parseLine classifies and parses one line.
func (g *gridftpReader) parseLine(line string) (gridftpRecord, lineKind, error) {
	var rec gridftpRecord
	line = strings.TrimRight(line, "\r\n")
	if strings.TrimSpace(line) == "" {
		return rec, kindBlank, nil
	}
	f := splitGridFTPFields(line)
	ev, ok := f.get(keyNLEVNT)
	if !ok {
		if isServerLogLine(line) {
			return rec, kindNonTransfer, nil
		}
		return rec, kindMalformed, errors.New("no NL.EVNT field: not a transfer-log record")
	}
	if f.dup >= 0 {
		return rec, kindMalformed, fmt.Errorf("%s appears twice: %w", gridftpKeys[f.dup], errTorn)
	}
	if ev != "FTP_INFO" {
		return rec, kindOtherEvent, nil
	}
	for _, k := range gridftpRequired {
		if _, ok := f.get(k); !ok {
			return rec, kindMalformed, fmt.Errorf("missing %s", gridftpKeys[k])
		}
	}
	// A reply code is three digits (RFC 959). Anything else is not a
	// failed transfer but a broken record: most often the last line of
	// a log copied while the server wrote it, cut inside "CODE=226".
	codeS, _ := f.get(keyCODE)
	if len(codeS) != 3 || !allDigits(codeS) {
		return rec, kindMalformed, fmt.Errorf("CODE %q: not a three-digit FTP reply code (a record cut off?)", codeS)
	}
	if codeS != "226" {
		return rec, kindFailedCode, nil
	}
	var send bool
	switch typ, _ := f.get(keyTYPE); typ {
	case "RETR", "ERET":
		send = true
	case "STOR", "ESTO":
	case "":
		return rec, kindMalformed, errors.New("empty TYPE")
	default:
		return rec, kindOtherType, nil
	}
	startS, _ := f.get(keySTART)
	start, err := parseGridFTPTime(startS)
	if err != nil {
		return rec, kindMalformed, fmt.Errorf("START %q: %w", startS, err)
	}
	// DATE is when the record was written, at the transfer's end, by the
	// same clock: a START after it is a corrupt record, whose arrival
	// would be wrong.
	if d, _ := f.get(keyDATE); d != "" {
		date, err := parseGridFTPTime(d)
		if err != nil {
			return rec, kindMalformed, fmt.Errorf("DATE %q: %w", d, err)
		}
		if start.After(date) {
			return rec, kindMalformed, fmt.Errorf("START %s is after DATE %s: the transfer would end before it began", startS, d)
		}
	}
	nb, _ := f.get(keyNBYTES)
	if rec.x.Size, err = parseSize(nb); err != nil {
		return rec, kindMalformed, fmt.Errorf("NBYTES: %w", err)
	}
	host, _ := f.get(keyHOST)
	if host == "" {
		return rec, kindMalformed, errors.New("empty HOST")
	}
	dest, _ := f.get(keyDEST)
	peer, err := parseGridFTPDest(dest)
	if err != nil {
		return rec, kindMalformed, fmt.Errorf("DEST %q: %w", dest, err)
	}
	host, peer = g.host(host), g.host(peer)
	if send {
		rec.x.Src, rec.x.Dst = host, peer
	} else {
		rec.x.Src, rec.x.Dst = peer, host
	}
	if p, _ := f.get(keyFILE); p != "" {
		rec.x.Path = strings.Clone(p)
	}
	rec.m.sec, rec.m.nsec = start.Unix(), int32(start.Nanosecond())
	rec.m.hash = maphash.String(g.seed, strings.TrimRight(line[f.first:], " \t"))
	return rec, kindTransfer, nil
}

// isServerLogLine reports whether line is a message of the server log
// ("[pid] date :: text"), whose "Transfer stats:" lines carry transfer
// records and whose others (connections, authorisations, start-up) do not.
func isServerLogLine(line string) bool {
	rest, ok := strings.CutPrefix(line, "[")
	if !ok {
		return false
	}
	pid, rest, ok := strings.Cut(rest, "]")
	return ok && pid != "" && allDigits(pid) && strings.Contains(rest, " :: ")
}

// gridftpFields is a record split into its known fields: the value of key
// k is line[lo[k]:hi[k]] if has[k].
type gridftpFields struct {
	line   string
	lo, hi [numGridFTPKeys]int
	has    [numGridFTPKeys]bool
	// dup is a key of gridftpOnce seen twice at the start of a word, -1
	// if none.
	dup int
	// first is where the first chosen key starts: the record proper,
	// without a server-log prefix.
	first int
}

func (f *gridftpFields) get(k int) (string, bool) {
	if !f.has[k] {
		return "", false
	}
	return f.line[f.lo[k]:f.hi[k]], true
}

// splitGridFTPFields splits a record into its known KEY=value fields. A key
// starts at the beginning of the line or after a blank. Keys are matched in
// the server's order first, so that a path containing, say, " USER=" does
// not end FILE early; if that misses a required key (a writer with another
// order), the first occurrence of each key is used instead. Text before the
// first key (a server-log prefix such as "[pid] date :: Transfer stats: ")
// is ignored. Free-text fields (FILE, VOLUME) run to the next key; other
// fields are their first word, so unknown trailing key=value pairs do not
// corrupt, say, CODE. It allocates nothing for ordinary lines.
func splitGridFTPFields(line string) gridftpFields {
	type cand struct{ key, pos int }
	var buf [2 * numGridFTPKeys]cand
	cands := buf[:0]
	var count [numGridFTPKeys]int
	for i := 0; i < len(line); i++ {
		if i > 0 && line[i-1] != ' ' && line[i-1] != '\t' {
			continue
		}
		for k, key := range gridftpKeys {
			if line[i] == key[0] && strings.HasPrefix(line[i:], key) && len(line) > i+len(key) && line[i+len(key)] == '=' {
				cands = append(cands, cand{k, i})
				count[k]++
			}
		}
	}
	out := gridftpFields{line: line, dup: -1}
	for _, k := range gridftpOnce {
		if count[k] > 1 {
			out.dup = k
			break
		}
	}
	pick := func(dst []cand, ordered bool) []cand {
		last := -1
		for k := range gridftpKeys {
			for _, c := range cands {
				if c.key == k && (!ordered || c.pos > last) {
					dst = append(dst, c)
					last = c.pos
					break
				}
			}
		}
		slices.SortFunc(dst, func(a, b cand) int { return a.pos - b.pos })
		return dst
	}
	hasRequired := func(cs []cand) bool {
		for _, req := range gridftpRequired {
			if !slices.ContainsFunc(cs, func(c cand) bool { return c.key == req }) {
				return false
			}
		}
		return true
	}
	var orderedBuf, firstBuf [numGridFTPKeys]cand
	chosen := pick(orderedBuf[:0], true)
	if !hasRequired(chosen) {
		if all := pick(firstBuf[:0], false); hasRequired(all) {
			chosen = all
		}
	}
	if len(chosen) > 0 {
		out.first = chosen[0].pos
	}
	for i, c := range chosen {
		hi := len(line)
		if i+1 < len(chosen) {
			hi = chosen[i+1].pos
		}
		lo := min(c.pos+len(gridftpKeys[c.key])+1, hi) // hi < lo: overlapping matches in a degenerate line
		for hi > lo && (line[hi-1] == ' ' || line[hi-1] == '\t') {
			hi--
		}
		if c.key != keyFILE && c.key != keyVOLUME {
			// Other fields are their first word.
			for lo < hi && isBlank(line[lo]) {
				lo++
			}
			for j := lo; j < hi; j++ {
				if isBlank(line[j]) {
					hi = j
					break
				}
			}
		}
		out.lo[c.key], out.hi[c.key], out.has[c.key] = lo, hi, true
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

func isBlank(b byte) bool {
	return b == ' ' || b == '\t' || b == '\v' || b == '\f' || b == '\r' || b == '\n'
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
