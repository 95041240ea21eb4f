package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// roundTripTrace has the awkward values: batch tasks, a path with a comma,
// a quote and a space, an empty path, a non-contiguous ID set, and
// arrivals that are not short decimals.
func roundTripTrace(t *testing.T) *Trace {
	tr := mustGenerate(t, paperSpec(0.25, "4x", 3))
	if err := AddBatch(tr, 17, PaperBatchSize, PaperSource, PaperDestinations(), 0, 3); err != nil {
		t.Fatal(err)
	}
	tr.Transfers[5].Path = `/data/a, "b" c`
	tr.Transfers[6].Path = ""
	n := len(tr.Transfers)
	tr.Transfers[n-1].Arrival += 1.0 / 3
	for i := range tr.Transfers {
		tr.Transfers[i].ID = int64(10 * i)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		write func(*bytes.Buffer, *Trace) error
		read  func(*bytes.Buffer) (*Trace, error)
	}{
		{"csv", func(b *bytes.Buffer, t *Trace) error { return WriteCSV(b, t) }, func(b *bytes.Buffer) (*Trace, error) { return ReadCSV(b) }},
		{"jsonl", func(b *bytes.Buffer, t *Trace) error { return WriteJSONL(b, t) }, func(b *bytes.Buffer) (*Trace, error) { return ReadJSONL(b) }},
	}
	for _, tc := range tests {
		want := roundTripTrace(t)
		var buf bytes.Buffer
		if err := tc.write(&buf, want); err != nil {
			t.Fatalf("%s: write: %v", tc.name, err)
		}
		got, err := tc.read(&buf)
		if err != nil {
			t.Fatalf("%s: read: %v", tc.name, err)
		}
		if !slices.Equal(got.Transfers, want.Transfers) {
			for i := range min(len(got.Transfers), len(want.Transfers)) {
				if got.Transfers[i] != want.Transfers[i] {
					t.Fatalf("%s: transfer %d: got %+v, want %+v", tc.name, i, got.Transfers[i], want.Transfers[i])
				}
			}
			t.Fatalf("%s: %d transfers, want %d", tc.name, len(got.Transfers), len(want.Transfers))
		}
	}
}

func TestReadCSV(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Transfer
		wantErr string
	}{
		{
			name: "minimal columns, unsorted, renumbered",
			in:   "arrival,src,dst,size\n5,s,a,10\n1.5,s,b,20\n",
			want: []Transfer{{ID: 0, Arrival: 1.5, Src: "s", Dst: "b", Size: 20}, {ID: 1, Arrival: 5, Src: "s", Dst: "a", Size: 10}},
		},
		{
			name: "ids kept, sorted by arrival then id, columns reordered, extra column",
			in:   "size,dst,src,arrival,id,batch,path,note\n10,a,s,5,7,true,/x,hi\n20,b,s,5,3,0,/y,\n30,c,s,1,9,1,,\n",
			want: []Transfer{
				{ID: 9, Arrival: 1, Src: "s", Dst: "c", Size: 30, Batch: true},
				{ID: 3, Arrival: 5, Src: "s", Dst: "b", Size: 20, Path: "/y"},
				{ID: 7, Arrival: 5, Src: "s", Dst: "a", Size: 10, Batch: true, Path: "/x"},
			},
		},
		{
			name: "duplicate ids renumbered, ties keep input order",
			in:   "id,arrival,src,dst,size\n4,2,s,a,1\n4,2,s,b,2\n1,0,s,c,3\n",
			want: []Transfer{{ID: 0, Arrival: 0, Src: "s", Dst: "c", Size: 3}, {ID: 1, Arrival: 2, Src: "s", Dst: "a", Size: 1}, {ID: 2, Arrival: 2, Src: "s", Dst: "b", Size: 2}},
		},
		{
			name: "missing id renumbers all",
			in:   "id,arrival,src,dst,size\n4,2,s,a,1\n,1,s,b,2\n",
			want: []Transfer{{ID: 0, Arrival: 1, Src: "s", Dst: "b", Size: 2}, {ID: 1, Arrival: 2, Src: "s", Dst: "a", Size: 1}},
		},
		{
			name: "BOM, upper-case header, float size",
			in:   "\ufeffARRIVAL,Src,DST,Size\n0,s,a,2.7e9\n",
			want: []Transfer{{ID: 0, Arrival: 0, Src: "s", Dst: "a", Size: 2700000000}},
		},
		{name: "header only", in: "arrival,src,dst,size\n", want: nil},
		{name: "empty", in: "", wantErr: "empty input"},
		{name: "missing column", in: "arrival,src,size\n1,s,2\n", wantErr: `line 1: header lacks column "dst"`},
		{name: "duplicate column", in: "arrival,src,dst,size,size\n", wantErr: `line 1: duplicate column "size"`},
		{name: "bad size", in: "arrival,src,dst,size\n1,s,a,10\n2,s,a,abc\n", wantErr: `line 3: size "abc": invalid syntax`},
		{name: "fractional size", in: "arrival,src,dst,size\n1,s,a,1.5\n", wantErr: `line 2: size "1.5"`},
		{name: "negative size", in: "arrival,src,dst,size\n1,s,a,-1\n", wantErr: `line 2: size "-1": negative`},
		{name: "negative arrival", in: "arrival,src,dst,size\n-1,s,a,1\n", wantErr: `line 2: arrival "-1": negative`},
		{name: "size of 1 EB", in: "arrival,src,dst,size\n1,s,a,1e18\n", want: []Transfer{{ID: 0, Arrival: 1, Src: "s", Dst: "a", Size: 1e18}}},
		{name: "size past 1 EB", in: "arrival,src,dst,size\n1,s,a,9000000000000000000\n", wantErr: `line 2: size "9000000000000000000": more than`},
		{name: "NaN arrival", in: "arrival,src,dst,size\nNaN,s,a,1\n", wantErr: `line 2: arrival "NaN": not a finite number`},
		{name: "bad batch", in: "arrival,src,dst,size,batch\n1,s,a,1,maybe\n", wantErr: `line 2: batch "maybe"`},
		{name: "bad id", in: "id,arrival,src,dst,size\nx,1,s,a,1\n", wantErr: `line 2: id "x": invalid syntax`},
		{name: "short row", in: "arrival,src,dst,size\n1,s,a\n", wantErr: "line 2: 3 fields, header has 4"},
		{name: "bad quote", in: "arrival,src,dst,size\n1,\"s,a,1\n", wantErr: "line "},
	}
	for _, tc := range tests {
		got, err := ReadCSV(strings.NewReader(tc.in))
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
		if !slices.Equal(got.Transfers, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got.Transfers, tc.want)
		}
	}
}

func TestReadJSONL(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Transfer
		wantErr string
	}{
		{
			name: "sorted, ids kept, blank lines, CRLF, unknown field",
			in:   "{\"id\":5,\"arrival\":2,\"src\":\"s\",\"dst\":\"a\",\"size\":1,\"x\":1}\r\n\n{\"id\":2,\"arrival\":1,\"src\":\"s\",\"dst\":\"b\",\"size\":2,\"batch\":true,\"path\":\"/p\"}",
			want: []Transfer{{ID: 2, Arrival: 1, Src: "s", Dst: "b", Size: 2, Batch: true, Path: "/p"}, {ID: 5, Arrival: 2, Src: "s", Dst: "a", Size: 1}},
		},
		{
			name: "no ids renumbered",
			in:   `{"arrival":2,"src":"s","dst":"a","size":1}` + "\n" + `{"arrival":1,"src":"s","dst":"b","size":2e3}`,
			want: []Transfer{{ID: 0, Arrival: 1, Src: "s", Dst: "b", Size: 2000}, {ID: 1, Arrival: 2, Src: "s", Dst: "a", Size: 1}},
		},
		{name: "empty", in: "", want: nil},
		{name: "missing arrival", in: `{"src":"s","dst":"a","size":1}`, wantErr: `line 1: missing "arrival"`},
		{name: "missing size", in: "\n" + `{"arrival":1,"src":"s","dst":"a"}`, wantErr: `line 2: missing "size"`},
		{name: "negative size", in: `{"arrival":1,"src":"s","dst":"a","size":-4}`, wantErr: `line 1: size "-4": negative`},
		{name: "absurd size", in: `{"arrival":1,"src":"s","dst":"a","size":1e30}`, wantErr: `line 1: size "1e30": more than`},
		{name: "negative arrival", in: `{"arrival":-1,"src":"s","dst":"a","size":4}`, wantErr: "line 1: arrival -1: negative"},
		{name: "string size", in: `{"arrival":1,"src":"s","dst":"a","size":"big"}`, wantErr: "line 1:"},
		{name: "not an object", in: `[1,2]`, wantErr: "line 1: want a JSON object"},
		{name: "truncated", in: `{"arrival":1,`, wantErr: "line 1:"},
		{name: "bad id", in: `{"id":1.5,"arrival":1,"src":"s","dst":"a","size":4}`, wantErr: `line 1: id "1.5"`},
	}
	for _, tc := range tests {
		got, err := ReadJSONL(strings.NewReader(tc.in))
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
		if !slices.Equal(got.Transfers, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got.Transfers, tc.want)
		}
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	tr := mustGenerate(t, paperSpec(0.25, "", 1))
	var csvBuf, jsonBuf bytes.Buffer
	if err := WriteCSV(&csvBuf, tr); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSONL(&jsonBuf, tr); err != nil {
		t.Fatal(err)
	}
	logBytes, err := os.ReadFile(filepath.Join("testdata", "nersc-dtn-sample.log"))
	if err != nil {
		t.Fatal(err)
	}
	gz := func(b []byte) []byte {
		var out bytes.Buffer
		w := gzip.NewWriter(&out)
		w.Write(b)
		w.Close()
		return out.Bytes()
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		file, format string
		content      []byte
		wantN        int
		wantName     string
	}{
		{"t.csv", "", csvBuf.Bytes(), 522, "t"},
		{"t.jsonl", "", jsonBuf.Bytes(), 522, "t"},
		{"t.json", "", jsonBuf.Bytes(), 522, "t"},
		{"x.log", "", logBytes, 11, "x"},
		{"x.log.gz", "", gz(logBytes), 11, "x"},
		{"sniff-csv", "", csvBuf.Bytes(), 522, "sniff-csv"},
		{"sniff-jsonl.txt", "", jsonBuf.Bytes(), 522, "sniff-jsonl"},
		{"sniff-log.gz", "", gz(logBytes), 11, "sniff-log"},
		{"forced.txt", "gridftp", logBytes, 11, "forced"},
		{"forced.dat", "csv", csvBuf.Bytes(), 522, "forced"},
	}
	for _, tc := range tests {
		p := write(tc.file, tc.content)
		got, err := Read(p, tc.format)
		if err != nil {
			t.Errorf("Read(%s, %q): %v", tc.file, tc.format, err)
			continue
		}
		if len(got.Transfers) != tc.wantN || got.Name != tc.wantName {
			t.Errorf("Read(%s): %d transfers named %q, want %d named %q", tc.file, len(got.Transfers), got.Name, tc.wantN, tc.wantName)
		}
	}

	// Errors carry the path and line, and never a partial trace.
	bad := write("bad.csv", []byte("arrival,src,dst,size\n1,s,a,1\n1,s,a,abc\n"))
	_, err = Read(bad, "")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 3 || !strings.Contains(err.Error(), "bad.csv line 3: size \"abc\": invalid syntax") {
		t.Errorf("Read(bad.csv) error %v", err)
	}
	for _, tc := range []struct{ file, format, want string }{
		{write("what.bin", []byte("hello\n")), "", "cannot tell the format"},
		{write("y.csv", []byte("a,b\n")), "xml", "unknown format"},
		{filepath.Join(dir, "missing.csv"), "", "no such file"},
		{write("empty.log", nil), "", "empty input"},
	} {
		if _, err := Read(tc.file, tc.format); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%s, %q): error %v, want %q", tc.file, tc.format, err, tc.want)
		}
	}
}

// TestReadFileVolumeOverflow: transfers that are each allowed but sum past
// what the volume counts hold are refused, not summed into a negative
// volume.
func TestReadFileVolumeOverflow(t *testing.T) {
	var b strings.Builder
	b.WriteString("arrival,src,dst,size\n")
	for i := range 10 {
		fmt.Fprintf(&b, "%d,s,a,1000000000000000000\n", i)
	}
	p := filepath.Join(t.TempDir(), "big.csv")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadFile(p, ""); err == nil || !strings.Contains(err.Error(), "add up to more than") {
		t.Errorf("got %v, want an error about the total volume", err)
	}
}

// TestReadByteOrderMark: a file that starts with a UTF-8 byte order mark,
// as Windows tools (PowerShell 5's Out-File, Notepad) write them, loads
// like one without. Before, a JSONL file failed on line 1 ("want a JSON
// object"), one without a telling extension was taken for CSV and failed
// with "bare \" in non-quoted-field", and a transfer log's first record
// lost its DATE (so it was no longer recognised as a repeat).
func TestReadByteOrderMark(t *testing.T) {
	const bom = "\ufeff"
	const jsonl = `{"arrival":0,"src":"a","dst":"b","size":10}` + "\n" + `{"arrival":1,"src":"a","dst":"b","size":20}` + "\n"
	const csv = "arrival,src,dst,size\n0,a,b,10\n1,a,b,20\n"
	logBytes, err := os.ReadFile(filepath.Join("testdata", "nersc-dtn-sample.log"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(logBytes), "\n")
	dir := t.TempDir()
	tests := []struct {
		file, content  string
		wantN, wantDup int
	}{
		{"t.jsonl", bom + jsonl, 2, 0},
		{"jsonl.txt", bom + jsonl, 2, 0},
		{"t.csv", bom + csv, 2, 0},
		{"csv.txt", bom + csv, 2, 0},
		{"t.log", bom + string(logBytes), 11, 0},
		// The first record repeated: a repeat only if its DATE is read.
		{"rep.log", bom + first + "\n" + string(logBytes), 11, 1},
		{"rep.txt", bom + first + "\n" + string(logBytes), 11, 1},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			p := filepath.Join(dir, tc.file)
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, rep, err := ReadFile(p, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Transfers) != tc.wantN || rep.Duplicate != tc.wantDup || rep.Malformed != 0 {
				t.Errorf("%d transfers, %d duplicates, %d malformed; want %d, %d, 0 (%s)", len(got.Transfers), rep.Duplicate, rep.Malformed, tc.wantN, tc.wantDup, rep)
			}
		})
	}
}

// TestReadTruncatedGzip: a gzip-compressed trace cut off (a rotated log
// copied while it was compressed, a partial download) fails naming the
// file, the line reached and that the archive ends early, in every
// format, rather than with a bare "unexpected EOF".
func TestReadTruncatedGzip(t *testing.T) {
	dir := t.TempDir()
	tr := mustGenerate(t, paperSpec(0.25, "", 1))
	var csvBuf, jsonBuf bytes.Buffer
	if err := WriteCSV(&csvBuf, tr); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSONL(&jsonBuf, tr); err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	for i := range 500 {
		logBuf.WriteString(gridftpLine("FILE=/a b/c", fmt.Sprintf("FILE=/f%d", i*7919)) + "\n")
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"t.csv.gz", csvBuf.Bytes()},
		{"t.jsonl.gz", jsonBuf.Bytes()},
		{"t.log.gz", logBuf.Bytes()},
	} {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(tc.data)
		w.Close()
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, z.Bytes()[:z.Len()*2/3], 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := ReadFile(p, "")
		pe, ok := errors.AsType[*ParseError](err)
		if !ok || pe.Line < 2 || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "ends early") {
			t.Errorf("%s: error %v, want the path, the line reached and that the compressed data ends early", tc.name, err)
		}
	}
}

// TestReadOtherCompressors: rotated logs compressed with bzip2 (logrotate's
// compresscmd) load like gzip ones; xz, zstd and lz4 files are refused
// naming the compressor, not read as text (which failed as "cannot tell
// the format" or, with --format, as every line malformed).
func TestReadOtherCompressors(t *testing.T) {
	tr, rep, err := ReadFile(filepath.Join("testdata", "nersc-dtn-sample.log.bz2"), "")
	if err != nil || len(tr.Transfers) != 11 || rep.Malformed != 0 || tr.Name != "nersc-dtn-sample" {
		t.Fatalf("bzip2 log: %v, report %v; want its 11 transfers", err, rep)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name, magic, want string
	}{
		{"t.log.xz", "\xfd7zXZ\x00", "xz"},
		{"t.log.zst", "\x28\xb5\x2f\xfd", "zstd"},
		{"t.log.lz4", "\x04\x22\x4d\x18", "lz4"},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.magic+"\x00\x01binary"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, format := range []string{"", "gridftp"} {
			_, _, err := ReadFile(p, format)
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "compressed with "+tc.want) {
				t.Errorf("%s (format %q): error %v, want the path and %q named", tc.name, format, err, tc.want)
			}
		}
	}
}
