package trace

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// gridftpLine is okLine with its variable fields replaced.
func gridftpLine(repl ...string) string { return strings.NewReplacer(repl...).Replace(okLine) }

// TestGridFTPLoadKeepsNoLines: a loaded log holds its transfers' values,
// not the lines they were read from. Lines padded with 20 KB that the
// loader does not use must not stay alive after the load, wherever the
// padding is; and splitting a line into fields allocates nothing.
func TestGridFTPLoadKeepsNoLines(t *testing.T) {
	pad := strings.Repeat("x", 20_000)
	const n = 1000 // 20 MB of lines
	tests := []struct {
		name string
		line func(i int) string
	}{
		{"trailing unknown key", func(i int) string {
			return gridftpLine("FILE=/a b/c", fmt.Sprintf("FILE=/f%d", i)) + " TASKID=" + pad
		}},
		{"server-log prefix", func(i int) string {
			return "[1] " + pad + " :: Transfer stats: " + gridftpLine("FILE=/a b/c", fmt.Sprintf("FILE=/f%d", i))
		}},
		{"long VOLUME after FILE", func(i int) string {
			return gridftpLine("FILE=/a b/c", fmt.Sprintf("FILE=/f%d", i), "VOLUME=/", "VOLUME=/"+pad)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var b strings.Builder
			for i := range n {
				b.WriteString(tc.line(i))
				b.WriteByte('\n')
			}
			in := b.String()
			size := len(in)
			tr, _, err := ReadGridFTPLog(strings.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			in = ""
			b = strings.Builder{}
			runtime.GC()
			runtime.ReadMemStats(&after)
			if len(tr.Transfers) != n {
				t.Fatalf("%d transfers, want %d", len(tr.Transfers), n)
			}
			grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			if grew > int64(size)/10 {
				t.Errorf("the loaded trace keeps %d bytes of heap for %d bytes of input: the lines stay alive", grew, size)
			}
			runtime.KeepAlive(tr)
		})
	}
	if a := testing.AllocsPerRun(100, func() { splitGridFTPFields(okLine) }); a != 0 {
		t.Errorf("splitGridFTPFields allocates %v times per line, want 0", a)
	}
}

// TestGridFTPTornRecord: a record cut short, with the next record
// appended to the same line, is never merged into one transfer. The cut
// record is malformed and named; the complete record after it is read, not
// dropped with it. Current servers cut a record at 4095 bytes
// (snprintf into a 4 KiB buffer, no newline then), so a long FILE makes
// the next record land on the same line. A key repeated other than by a
// second record leaves the line malformed. A path that merely contains
// " USER=" still parses.
func TestGridFTPTornRecord(t *testing.T) {
	first := gridftpLine("START=20190731073030.000000", "START=20190731073031.000000", "NBYTES=100", "NBYTES=111",
		"FILE=/a b/c", "FILE=/first", "DEST=[1.2.3.4]", "DEST=[5.5.5.5]")
	second := gridftpLine("DATE=20190731073044.992375", "DATE=20190731073050.000000", "NBYTES=100", "NBYTES=222",
		"FILE=/a b/c", "FILE=/second", "DEST=[1.2.3.4]", "DEST=[6.6.6.6]")
	want, kind, err := newGridFTPReader().parseLine(second)
	if kind != kindTransfer {
		t.Fatalf("second record alone: %v", err)
	}
	longPath := gridftpLine("FILE=/a b/c", "FILE=/"+strings.Repeat("d/", 2100))
	tests := []struct {
		name      string
		line      string
		malformed string // "" if nothing on the line is malformed
		recovered bool   // the second record is read
	}{
		{"cut after 150 bytes (the audit's torn.log)", first[:150] + second, "cut off where the record at byte 150 begins", true},
		{"cut inside FILE", first[:strings.Index(first, "FILE=")+8] + second, "missing NBYTES", true},
		{"cut after FILE, before a blank", first[:strings.Index(first, " BUFFER=")] + " " + second, "missing NBYTES", true},
		{"cut inside NBYTES", first[:strings.Index(first, "NBYTES=")+9] + second, "missing DEST", true},
		{"cut just before CODE", first[:strings.Index(first, "CODE=")] + second, "missing CODE", true},
		{"DATE repeated after a blank", first[:strings.Index(first, " HOST=")] + " " + second, "a record cut off", true},
		{"a long FILE cut at 4095 bytes by the server", longPath[:4095] + second, "cut off where the record at byte 4095 begins", true},
		{"START twice", second + " START=20190731073031.000000", "START appears twice", false},
		{"NL.EVNT twice", second + " NL.EVNT=FTP_INFO", "NL.EVNT appears twice", false},
		{"NBYTES twice", second + " NBYTES=5", "NBYTES appears twice", false},
		{"path containing an earlier key", strings.Replace(second, "FILE=/second", "FILE=/x USER=y/z=1 w", 1), "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, rep, err := ReadGridFTPLog(strings.NewReader(tc.line + "\n" + okLine + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			wantN, wantMalformed := 1, 0
			if tc.recovered {
				wantN++
			}
			if tc.malformed != "" {
				wantMalformed++
			}
			if rep.Malformed != wantMalformed || len(tr.Transfers) != wantN || rep.Lines != 2 {
				t.Fatalf("%d transfers, report %+v; want %d transfers, %d malformed", len(tr.Transfers), rep, wantN, wantMalformed)
			}
			if tc.malformed != "" && (!strings.HasPrefix(rep.Warnings[0], "line 1: ") || !strings.Contains(rep.Warnings[0], tc.malformed)) {
				t.Errorf("warning %q, want line 1 named and %q", rep.Warnings[0], tc.malformed)
			}
			if tc.recovered && tc.malformed != "" {
				var got *Transfer
				for i := range tr.Transfers {
					if tr.Transfers[i].Path == "/second" {
						got = &tr.Transfers[i]
					}
				}
				if got == nil || got.Size != 222 || got.Src != "h" || got.Dst != "6.6.6.6" {
					t.Errorf("second record read as %+v, want /second, 222 bytes, h -> 6.6.6.6 (all: %+v)", got, tr.Transfers)
				}
			}
		})
	}
	// Wherever the first record is cut, the line never becomes a transfer
	// other than the second record.
	g := newGridFTPReader()
	for cut := 1; cut < len(first); cut++ {
		got, kind, _ := g.parseLine(first[:cut] + second)
		if kind == kindTransfer && (got.x != want.x || got.m.sec != want.m.sec || got.m.nsec != want.m.nsec) {
			t.Errorf("cut at %d: merged into %+v, want the second record %+v or a malformed line", cut, got.x, want.x)
		}
	}
}

// TestGridFTPOutlierStart: a record whose START is far from the rest of
// the log (a wrong clock) is skipped and named, rather than becoming
// arrival 0 and putting every other transfer decades later; what the
// loader accepts is within the simulator's MaxArrival, and what is not is
// refused naming the line.
func TestGridFTPOutlierStart(t *testing.T) {
	at := func(start, date string) string {
		return gridftpLine("START=20190731073030.000000", "START="+start, "DATE=20190731073044.992375", "DATE="+date,
			"FILE=/a b/c", "FILE=/"+start)
	}
	var day []string // a day's log, one record an hour
	for h := range 24 {
		s := fmt.Sprintf("201907%02d%02d0000.000000", 10, h)
		day = append(day, at(s, s))
	}
	var year []string // a year's log, one record a week
	for w := range 52 {
		s := fmt.Sprintf("2019%02d%02d120000.000000", 1+w/5%12, 1+w%5*5)
		year = append(year, at(s, s))
	}
	join := func(ls ...[]string) string {
		var all []string
		for _, l := range ls {
			all = append(all, l...)
		}
		return strings.Join(all, "\n") + "\n"
	}
	tests := []struct {
		name     string
		in       string
		outliers int
		warn     string // in the first warning
		span     float64
		wantErr  string
	}{
		{"1971 among 2019 (the audit's outlier.log)", join(day, []string{at("19710301120000.000000", "19710301120010.000000")}),
			1, "line 25: START 1971-03-01T12:00:00Z is 48.", 23 * 3600, ""},
		{"2099 among 2019", join([]string{at("20990101000000.000000", "20990101000001.000000")}, day),
			1, "line 1: START 2099-01-01T00:00:00Z is 79.", 23 * 3600, ""},
		{"a transfer that started 5 days before the rest is kept", join(day, []string{at("20190705000000.000000", "20190710230000.000000")}),
			0, "", 5*86400 + 23*3600, ""},
		{"a year's log keeps every week", join(year), 0, "", -1, ""},
		{"two records 48 years apart: beyond the replay limit", join([]string{at("19710301120000.000000", "19710301120010.000000"), at("20190710000000.000000", "20190710000000.000000")}),
			0, "", 0, "line 2: START 2019-07-10T00:00:00Z is 48.4 years after the earliest START"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, rep, err := ReadGridFTPLog(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outlier != tc.outliers || (tc.warn != "" && (len(rep.Warnings) == 0 || !strings.HasPrefix(rep.Warnings[0], tc.warn))) {
				t.Errorf("report %+v; want %d outliers, first warning %q", rep, tc.outliers, tc.warn)
			}
			st := tr.Stats()
			if tc.span >= 0 && st.Duration != tc.span {
				t.Errorf("arrivals over %v s, want %v", st.Duration, tc.span)
			}
			if st.LastArrival > MaxArrival {
				t.Errorf("last arrival %v beyond MaxArrival", st.LastArrival)
			}
			if tc.outliers > 0 && !strings.Contains(rep.String(), "far from the rest of the log") {
				t.Errorf("report string %q does not say why", rep.String())
			}
		})
	}
}

// TestArrivalLimit: CSV and JSONL arrivals beyond MaxArrival are refused
// naming the line, not left for the simulator to refuse by transfer ID.
func TestArrivalLimit(t *testing.T) {
	tests := []struct {
		name, file, body, want string
	}{
		{"csv", "t.csv", "arrival,src,dst,size\n0,s,a,1\n2e9,s,a,1\n", "t.csv line 3: arrival \"2e9\": more than 1e+09 s"},
		{"jsonl", "t.jsonl", `{"arrival":0,"src":"s","dst":"a","size":1}` + "\n" + `{"arrival":1.5e9,"src":"s","dst":"a","size":1}` + "\n",
			"t.jsonl line 2: arrival 1.5e+09: more than 1e+09 s"},
		{"csv at the limit loads", "ok.csv", "arrival,src,dst,size\n0,s,a,1\n1e9,s,a,1\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := ReadFile(p, "")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestServerLog: a globus-gridftp-server log is recognised from its
// content even when its first lines are not transfer records, its other
// messages are counted as such rather than as malformed lines, a rotated
// name (".log.1") keeps its format, and content no loader recognises says
// how to name the format.
func TestServerLog(t *testing.T) {
	msg := func(s string) string { return "[4242] Sun Mar  1 11:59:59 2020 :: " + s }
	stats := msg("Transfer stats: " + okLine)
	starts := strings.Repeat(msg("New connection from: 10.0.0.1:5000")+"\n", 5)
	tests := []struct {
		name, file, body, format string
		nonTransfer, malformed   int
		wantErr                  string
	}{
		{"server log opening with start-up messages", "server-log", msg("Server started in inetd mode.") + "\n" + starts + stats + "\n" + msg("Closed connection") + "\n", "", 7, 0, ""},
		{"rotated transfer log", "gridftp.log.1", starts + stats + "\n", "", 5, 0, ""},
		{"garbage stays malformed", "x.log", okLine + "\nnot a log line\n", "", 0, 1, ""},
		{"cannot tell", "notes", "hello\nworld\n", "", 0, 0, "--format csv, jsonl or gridftp"},
		{"a directory", "adir", "", "", 0, 0, "is a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), tc.file)
			var err error
			if tc.file == "adir" {
				err = os.Mkdir(p, 0o755)
			} else {
				err = os.WriteFile(p, []byte(tc.body), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			tr, rep, err := ReadFile(p, tc.format)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Format != "gridftp" || len(tr.Transfers) != 1 || rep.NonTransfer != tc.nonTransfer || rep.Malformed != tc.malformed {
				t.Errorf("%d transfers, report %+v; want 1, %d other server-log messages, %d malformed",
					len(tr.Transfers), rep, tc.nonTransfer, tc.malformed)
			}
		})
	}
}

// TestGridFTPDuplicates: a record that repeats an earlier one exactly
// (overlapping rotated logs read together) is counted and dropped, not
// replayed twice; records that differ in any field are all kept.
func TestGridFTPDuplicates(t *testing.T) {
	other := gridftpLine("FILE=/a b/c", "FILE=/other")
	tests := []struct {
		name  string
		lines []string
		n     int
		dups  int
		warn  string
	}{
		{"same line twice", []string{okLine, other, okLine}, 2, 1, "line 3: repeats line 1 exactly"},
		{"a log read twice", []string{okLine, other, okLine, other}, 2, 2, "line 3: repeats line 1 exactly"},
		{"same record in the server log and the transfer log", []string{okLine, "[7] Sun Mar  1 11:59:59 2020 :: Transfer stats: " + okLine}, 1, 1, "line 2: repeats line 1"},
		{"same START and file, other DATE: two transfers", []string{okLine, gridftpLine("DATE=20190731073044.992375", "DATE=20190731073045.000000")}, 2, 0, ""},
		{"other size", []string{okLine, gridftpLine("NBYTES=100", "NBYTES=101")}, 2, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, rep, err := ReadGridFTPLog(strings.NewReader(strings.Join(tc.lines, "\n")))
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Transfers) != tc.n || rep.Duplicate != tc.dups || rep.Parsed != tc.n {
				t.Errorf("%d transfers, report %+v; want %d, %d duplicates", len(tr.Transfers), rep, tc.n, tc.dups)
			}
			if tc.warn != "" && (len(rep.Warnings) == 0 || !strings.HasPrefix(rep.Warnings[0], tc.warn)) {
				t.Errorf("warnings %q, want the first to start %q", rep.Warnings, tc.warn)
			}
			if tc.dups > 0 && !strings.Contains(rep.String(), "exact duplicates") {
				t.Errorf("report string %q does not say", rep.String())
			}
			if err := tr.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestGridFTPOneMachineOneEndpoint: logs merged from several servers write
// one machine's address or name several ways; each machine is one
// endpoint, named as the log first wrote it. Before, [2001:db8::1] and
// 2001:DB8::1 were two endpoints, as were DTN1.Example.org and
// dtn1.example.org.
func TestGridFTPOneMachineOneEndpoint(t *testing.T) {
	lines := []string{
		gridftpLine("HOST=h", "HOST=[2001:db8::1]", "DEST=[1.2.3.4]", "DEST=[::ffff:10.0.0.1]"),
		gridftpLine("HOST=h", "HOST=2001:DB8:0::1", "DEST=[1.2.3.4]", "DEST=[10.0.0.1]", "FILE=/a b/c", "FILE=/2"),
		gridftpLine("HOST=h", "HOST=DTN1.Example.org", "DEST=[1.2.3.4]", "DEST=[2001:db8::0001]", "FILE=/a b/c", "FILE=/3"),
		gridftpLine("HOST=h", "HOST=dtn1.example.org", "DEST=[1.2.3.4]", "DEST=[2001:db8::1]", "FILE=/a b/c", "FILE=/4"),
	}
	tr, _, err := ReadGridFTPLog(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	eps := map[string]bool{}
	for _, x := range tr.Transfers {
		eps[x.Src], eps[x.Dst] = true, true
	}
	// Each machine keeps the first name the log gave it (without
	// brackets), so that a testbed written with the log's names matches.
	want := map[string]bool{"2001:db8::1": true, "::ffff:10.0.0.1": true, "DTN1.Example.org": true}
	if len(tr.Transfers) != 4 || fmt.Sprint(eps) != fmt.Sprint(want) {
		t.Errorf("%d transfers between %v, want 4 between %v", len(tr.Transfers), eps, want)
	}
}
