package trace

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadGridFTPLogNERSCSample(t *testing.T) {
	f, err := os.Open("testdata/nersc-dtn-sample.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, rep, err := ReadGridFTPLog(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Transfers) != 11 || rep.Parsed != 11 || rep.Lines != 11 || rep.Malformed != 0 {
		t.Fatalf("%d transfers, report %+v; want 11 from 11 lines", len(tr.Transfers), rep)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2019, 7, 31, 7, 30, 30, 432241000, time.UTC); !rep.Origin.Equal(want) {
		t.Errorf("origin %v, want %v", rep.Origin, want)
	}
	const (
		dtn = "dtn11.nersc.gov"
		pic = "192.101.102.150"
	)
	// By START: the five STOR lines (1, 2, 3, 5, 4), then the RETRs
	// (6, 8, 10, 7, then 9 and 11, which share a START and keep log order).
	want := []struct {
		arrival  float64
		src, dst string
		size     int64
		pathEnd  string
	}{
		{0, pic, dtn, 2753284040, "wrfout_d01_2019-05-10_00:00:00"},
		{2.015898, pic, dtn, 2753284040, "wrfout_d01_2019-05-10_01:00:00"},
		{14.705214, pic, dtn, 2753284040, "wrfout_d01_2019-05-10_02:00:00"},
		{32.730395, pic, dtn, 2753284040, "wrfout_d01_2019-05-10_04:00:00"},
		{35.105914, pic, dtn, 2753284040, "wrfout_d01_2019-05-10_03:00:00"},
		{173.503187, dtn, "128.117.181.64", 3064334152, "wrf1hr_d03_2015 04-25_00:00:00"},
		{175.448454, dtn, "128.117.181.61", 3064334152, "wrf1hr=d03_2015-05-01_00:00:00"},
		{175.474961, dtn, "128.117.181.63", 3064334152, "wrf1hr_d03_2015-05-02_00:00:00"},
		{175.542448, dtn, "128.117.181.62", 3064334152, "wrf1hr=d03_2015 05-03_00:00:00"},
		{176.67044, dtn, "0.0.0.0", 3064334152, "wrf1hr=d03_2015-05-04_00:00:00"},
		{176.67044, dtn, "0.0.0.0", 3064334152, "wrf1hr=d03_2015-05-04_00:00:00"},
	}
	for i, w := range want {
		x := tr.Transfers[i]
		if x.ID != int64(i) || math.Abs(x.Arrival-w.arrival) > 1e-9 || x.Src != w.src || x.Dst != w.dst ||
			x.Size != w.size || !strings.HasSuffix(x.Path, "/"+w.pathEnd) || x.Batch {
			t.Errorf("transfer %d = %+v, want arrival %v %s->%s size %d path .../%s",
				i, x, w.arrival, w.src, w.dst, w.size, w.pathEnd)
		}
	}
	if !strings.HasPrefix(tr.Transfers[0].Path, "/home/c/glock/pic/") {
		t.Errorf("path %q", tr.Transfers[0].Path)
	}
}

const okLine = "DATE=20190731073044.992375 HOST=h PROG=globus-gridftp-server NL.EVNT=FTP_INFO START=20190731073030.000000 USER=u FILE=/a b/c BUFFER=1 BLOCK=2 NBYTES=100 VOLUME=/ STREAMS=1 STRIPES=1 DEST=[1.2.3.4] TYPE=RETR CODE=226"

func TestReadGridFTPLogCases(t *testing.T) {
	line := func(repl ...string) string { return strings.NewReplacer(repl...).Replace(okLine) }
	tests := []struct {
		name    string
		in      string
		wantN   int
		check   func(*testing.T, *Trace, *LoadReport)
		wantErr string
	}{
		{
			name:  "failed code skipped and counted",
			in:    okLine + "\n" + line("CODE=226", "CODE=426") + "\n",
			wantN: 1,
			check: func(t *testing.T, _ *Trace, r *LoadReport) {
				if r.FailedCode != 1 {
					t.Errorf("FailedCode %d", r.FailedCode)
				}
			},
		},
		{
			name:  "malformed line skipped with warning",
			in:    okLine + "\n" + line("NBYTES=100", "NBYTES=lots") + "\ngarbage\n\n",
			wantN: 1,
			check: func(t *testing.T, _ *Trace, r *LoadReport) {
				if r.Malformed != 2 || r.FirstMalformed != 2 || r.Blank != 1 || len(r.Warnings) != 2 ||
					!strings.HasPrefix(r.Warnings[0], "line 2: NBYTES") || !strings.HasPrefix(r.Warnings[1], "line 3:") {
					t.Errorf("report %+v", r)
				}
			},
		},
		{
			name:  "STOR direction, other event, LIST type",
			in:    line("TYPE=RETR", "TYPE=STOR") + "\n" + line("FTP_INFO", "FTP_OTHER") + "\n" + line("TYPE=RETR", "TYPE=LIST"),
			wantN: 1,
			check: func(t *testing.T, tr *Trace, r *LoadReport) {
				if x := tr.Transfers[0]; x.Src != "1.2.3.4" || x.Dst != "h" {
					t.Errorf("STOR: %s -> %s, want 1.2.3.4 -> h", x.Src, x.Dst)
				}
				if r.OtherEvent != 1 || r.OtherType != 1 {
					t.Errorf("report %+v", r)
				}
			},
		},
		{
			name: "server-log prefix, TASKID and retrans, old DEST, short fraction, striped DEST",
			in: "[24775] Thu Jul 27 12:59:42 2023 :: Transfer stats: " + okLine + " TASKID=abc retrans=0,0\n" +
				line("DEST=[1.2.3.4]", "DEST=1[5.6.7.8]", "START=20190731073030.000000", "START=20190731073031.2102") + "\n" +
				line("DEST=[1.2.3.4]", "DEST=[9.9.9.9,8.8.8.8]", "TYPE=RETR", "TYPE=ESTO"),
			wantN: 3,
			check: func(t *testing.T, tr *Trace, r *LoadReport) {
				x := tr.Transfers
				if x[0].Dst != "1.2.3.4" || x[0].Path != "/a b/c" || x[0].Size != 100 {
					t.Errorf("prefixed line: %+v", x[0])
				}
				if x[2].Dst != "5.6.7.8" || x[2].Arrival != 1.002102 {
					t.Errorf("old-format line: %+v (want arrival 1.002102: .2102 is 2102 us)", x[2])
				}
				if x[1].Src != "9.9.9.9" || x[1].Dst != "h" {
					t.Errorf("striped ESTO line: %+v", x[1])
				}
			},
		},
		{
			name:  "path containing an earlier key and an equals sign",
			in:    line("FILE=/a b/c", "FILE=/x USER=y/z=1 w"),
			wantN: 1,
			check: func(t *testing.T, tr *Trace, _ *LoadReport) {
				if p := tr.Transfers[0].Path; p != "/x USER=y/z=1 w" {
					t.Errorf("path %q", p)
				}
			},
		},
		{
			name:  "keys out of order still parse",
			in:    "NL.EVNT=FTP_INFO CODE=226 TYPE=STOR DEST=[1.1.1.1] NBYTES=5 START=20200101000000.5 HOST=h FILE=/f",
			wantN: 1,
			check: func(t *testing.T, tr *Trace, _ *LoadReport) {
				if x := tr.Transfers[0]; x.Size != 5 || x.Src != "1.1.1.1" || x.Path != "/f" {
					t.Errorf("%+v", x)
				}
			},
		},
		{name: "all malformed names first bad line", in: "\nnot a log\nneither\n", wantErr: "line 2: no NL.EVNT field"},
		{name: "bad START", in: line("START=20190731073030.000000", "START=2019-07-31"), wantErr: `line 1: START "2019-07-31"`},
		{name: "bad month", in: line("START=20190731073030.000000", "START=20191331073030.000000"), wantErr: "line 1: START"},
		{name: "START after DATE", in: line("START=20190731073030.000000", "START=20190731083030.000000"), wantErr: "line 1: START 20190731083030.000000 is after DATE"},
		{name: "bad DATE", in: line("DATE=20190731073044.992375", "DATE=yesterday"), wantErr: `line 1: DATE "yesterday"`},
		{name: "negative NBYTES", in: line("NBYTES=100", "NBYTES=-1"), wantErr: "line 1: NBYTES: size \"-1\": negative"},
		{name: "missing DEST", in: line("DEST=[1.2.3.4] ", ""), wantErr: "line 1: missing DEST"},
		{name: "unterminated DEST", in: line("DEST=[1.2.3.4]", "DEST=[1.2.3.4"), wantErr: "unterminated"},
		{name: "empty", in: "", wantErr: "empty input"},
		{name: "only failures", in: line("CODE=226", "CODE=550"), wantErr: "no successful transfer"},
	}
	for _, tc := range tests {
		tr, rep, err := ReadGridFTPLog(strings.NewReader(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(tr.Transfers) != tc.wantN {
			t.Errorf("%s: %d transfers, want %d (report %+v)", tc.name, len(tr.Transfers), tc.wantN, rep)
			continue
		}
		if err := tr.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.check != nil {
			tc.check(t, tr, rep)
		}
	}
}

func TestParseGridFTPTime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"20190731073030.432241", time.Date(2019, 7, 31, 7, 30, 30, 432241000, time.UTC), true},
		{"20190731073030", time.Date(2019, 7, 31, 7, 30, 30, 0, time.UTC), true},
		{"20070215110703.2102", time.Date(2007, 2, 15, 11, 7, 3, 2102000, time.UTC), true},
		{"20190731073030.123456789", time.Date(2019, 7, 31, 7, 30, 30, 123456789, time.UTC), true},
		{"20190731073030.1234567", time.Date(2019, 7, 31, 7, 30, 30, 123456700, time.UTC), true},
		{"20190731073030.", time.Time{}, false},
		{"20190731073030.1234567890", time.Time{}, false},
		{"2019073107303", time.Time{}, false},
		{"2019073107303x.1", time.Time{}, false},
		{"20190230073030.1", time.Time{}, false}, // 30 February
		{"20190731073030.-1", time.Time{}, false},
	}
	for _, tc := range tests {
		got, err := parseGridFTPTime(tc.in)
		if (err == nil) != tc.ok || (tc.ok && !got.Equal(tc.want)) {
			t.Errorf("parseGridFTPTime(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestLoadReportString: what `sluice trace stats` and `sluice sim` print
// about a log says how many transfers were read, that empty files are
// kept, and what was skipped and why, with the first malformed line.
func TestLoadReportString(t *testing.T) {
	line := func(repl ...string) string { return strings.NewReplacer(repl...).Replace(okLine) }
	tests := []struct {
		name string
		in   string
		want []string
		not  []string
	}{
		{"clean", okLine + "\n" + line("FILE=/a b/c", "FILE=/a b/d") + "\n", []string{"gridftp: 2 lines, 2 transfers"}, []string{"skipped", "0 bytes"}},
		{"empty file kept", okLine + "\n" + line("NBYTES=100", "NBYTES=0") + "\n",
			[]string{"2 transfers", "1 of 0 bytes, kept"}, []string{"skipped"}},
		{"everything skipped once", strings.Join([]string{okLine, line("CODE=226", "CODE=426"), line("FTP_INFO", "FTP_OTHER"),
			line("TYPE=RETR", "TYPE=LIST"), "garbage"}, "\n"),
			[]string{"5 lines, 1 transfers", "1 failed (CODE other than 226)", "1 not transfer records", "1 not data transfers", "1 malformed", "first: line 5:"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.log")
			if err := os.WriteFile(p, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			_, rep, err := ReadFile(p, "")
			if err != nil {
				t.Fatal(err)
			}
			s := rep.String()
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("%q lacks %q", s, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(s, w) {
					t.Errorf("%q has %q", s, w)
				}
			}
		})
	}
}

// TestGridFTPCodeDigits: CODE is a three-digit FTP reply code; anything
// else is a malformed record, not a failed transfer. A log copied while
// the server was writing ends in a record cut inside "CODE=226", which
// was counted as a failed transfer ("CODE other than 226"), so a
// successful transfer was dropped under the wrong reason.
func TestGridFTPCodeDigits(t *testing.T) {
	cut := func(code string) string { return okLine + "\n" + strings.Replace(okLine, "CODE=226", "CODE="+code, 1) }
	tests := []struct {
		name                string
		in                  string
		wantFailed, wantBad int
		wantWarning         string
	}{
		{"cut after one digit", cut("2"), 0, 1, `CODE "2": not a three-digit`},
		{"cut after two digits", cut("22"), 0, 1, `CODE "22": not a three-digit`},
		{"four digits", cut("2260") + "\n", 0, 1, `CODE "2260": not a three-digit`},
		{"signed", cut("+226") + "\n", 0, 1, `CODE "+226": not a three-digit`},
		{"a real failure", cut("426") + "\n", 1, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, rep, err := ReadGridFTPLog(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Transfers) != 1 || rep.FailedCode != tc.wantFailed || rep.Malformed != tc.wantBad {
				t.Fatalf("%d transfers, %d failed, %d malformed; want 1, %d, %d (%s)", len(tr.Transfers), rep.FailedCode, rep.Malformed, tc.wantFailed, tc.wantBad, rep)
			}
			if tc.wantWarning != "" && (len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], tc.wantWarning)) {
				t.Errorf("warnings %q, want one containing %q", rep.Warnings, tc.wantWarning)
			}
		})
	}
}
