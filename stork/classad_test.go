package stork

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Ad
		err  string
	}{
		{
			name: "paper's example",
			in: `[
dap_type = "transfer";
stork_server = "oliver1.loni.org";
src_url = "gsiftp://eric1.loni.org/default/scratch/test.dat";
dest_url = "gsiftp://qbl1.loni.org/default/scratch/dest.dat";
optimization = "YES";
arguments = "-b 128K -s 10M";
x509proxy = "default";
]`,
			want: []Ad{{
				"dap_type": "transfer", "stork_server": "oliver1.loni.org",
				"src_url":      "gsiftp://eric1.loni.org/default/scratch/test.dat",
				"dest_url":     "gsiftp://qbl1.loni.org/default/scratch/dest.dat",
				"optimization": "YES", "arguments": "-b 128K -s 10M", "x509proxy": "default",
			}},
		},
		{
			name: "two ads, comments, barewords, no final semicolon, case",
			in:   "# a comment\n[ Dap_Type = \"estimation\"; // trailing\n use_history = TRUE; size = 5000 ]\n[dap_type=\"transfer\";src_url=\"a\\\"b#c\"]",
			want: []Ad{
				{"dap_type": "estimation", "use_history": "TRUE", "size": "5000"},
				{"dap_type": "transfer", "src_url": `a"b#c`},
			},
		},
		{name: "empty", in: "  \n# nothing\n", err: "no ClassAd"},
		{name: "unclosed ad", in: `[ a = "b";`, err: "line 1: ad not closed"},
		{name: "unclosed string", in: "[ a = \"b;\n]", err: "newline in a string"},
		{name: "missing equals", in: "[\n a \"b\"; ]", err: "line 2: want '='"},
		{name: "missing semicolon", in: `[ a = "b" c = "d" ]`, err: "want ';' after a"},
		{name: "duplicate", in: `[ a = 1; A = 2; ]`, err: "given twice"},
		{name: "JSON is not an ad", in: `{"files":[]}`, err: "want '['"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestStorkArgsAndURLs(t *testing.T) {
	for _, tt := range []struct {
		args           string
		sample, buffer int64
		err            bool
	}{
		{"-b 128K -s 10M", 10e6, 128e3, false},
		{"-s 20MiB -p 4 -dbg", 20 << 20, 0, false},
		{"", 0, 0, false},
		{"-s", 0, 0, true},
		{"-s lots", 0, 0, true},
	} {
		s, b, err := storkArgs(tt.args)
		if (err != nil) != tt.err || s != tt.sample || b != tt.buffer {
			t.Errorf("storkArgs(%q) = %d, %d, %v; want %d, %d, error %v", tt.args, s, b, err, tt.sample, tt.buffer, tt.err)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{"gsiftp://dtn1/data/x", "sluice://dtn1/data/x"},
		{"sluices://dtn1:8443/x", "sluices://dtn1:8443/x"},
		{"file:///etc/passwd", ""},
		{"dtn1/x", ""},
	} {
		got, err := storkURL(tt.in)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("storkURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestParseTooLarge: a file beyond the 16 MiB read limit is
// refused, not cut: cut between two ads, the ads after the cut were
// silently left out (here the second ad, after a long comment).
func TestParseTooLarge(t *testing.T) {
	ad := `[ src_url = "gsiftp://a/x"; dest_url = "gsiftp://b/x"; ]` + "\n"
	pad := strings.Repeat("# "+strings.Repeat("-", 97)+"\n", (16<<20)/100+1)
	in := ad + pad + ad
	got, err := Parse(strings.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("a %d-byte file: %d ads, error %v; want an error naming the 16 MiB limit", len(in), len(got), err)
	}
	// At the limit it is read whole.
	in = ad + pad[:16<<20-2*len(ad)-1] + "\n" + ad
	if got, err := Parse(strings.NewReader(in)); err != nil || len(got) != 2 {
		t.Fatalf("a %d-byte file: %d ads, error %v; want 2", len(in), len(got), err)
	}
}

// TestCheckMissingURL: an ad without src_url or dest_url (a typo
// in the name: dst_url) says which is missing and what the ad has, rather
// than that "" is not a URL.
func TestCheckMissingURL(t *testing.T) {
	for _, tt := range []struct {
		ad   Ad
		want []string
	}{
		{Ad{"dst_url": "gsiftp://b/x", "src_url": "gsiftp://a/x"}, []string{"no dest_url", "dst_url"}},
		{Ad{"source": "gsiftp://a/x", "dest_url": "gsiftp://b/x"}, []string{"no src_url", "source"}},
		{Ad{"src_url": "", "dest_url": "gsiftp://b/x"}, []string{`src_url: "" is not a URL`}},
		{Ad{}, []string{"no src_url in the ad (it is empty)"}},
	} {
		_, err := Check(tt.ad)
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Check(%v): %v, want an error saying %q", tt.ad, err, w)
			}
		}
	}
}

// TestCheckTransferArguments: a transfer ad's -s and -b (which
// Stork passes to the transfer) have no place in a job: the ad still
// runs, with a note saying they are not used; an estimation ad uses them
// and gets no note.
func TestCheckTransferArguments(t *testing.T) {
	for _, tt := range []struct {
		ad   Ad
		note bool
	}{
		{Ad{"dap_type": "transfer", "src_url": "gsiftp://a/x", "dest_url": "gsiftp://b/x", "optimization": "YES", "arguments": "-b 128K -s 10M"}, true},
		{Ad{"dap_type": "transfer", "src_url": "gsiftp://a/x", "dest_url": "gsiftp://b/x"}, false},
		{Ad{"dap_type": "estimation", "src_url": "gsiftp://a/x", "dest_url": "gsiftp://b/x", "size": "5G", "arguments": "-s 10M"}, false},
	} {
		a, err := Check(tt.ad)
		if err != nil {
			t.Fatalf("Check(%v): %v", tt.ad, err)
		}
		if got := len(a.Notes) > 0; got != tt.note {
			t.Errorf("Check(%v): notes %q, want a note: %v", tt.ad, a.Notes, tt.note)
		}
		if tt.note && !strings.Contains(a.Notes[0], "-s 10M") {
			t.Errorf("note %q does not name the arguments", a.Notes[0])
		}
	}
}

// TestCheckUnusedAttributes: attributes Sluice does not read are
// named in the ad's notes (printed by sluice submit), not dropped unseen.
func TestCheckUnusedAttributes(t *testing.T) {
	for _, tt := range []struct {
		ad   Ad
		want []string // in the notes
	}{
		{Ad{"dap_type": "transfer", "src_url": "gsiftp://a/x", "dest_url": "gsiftp://b/x", "log": "/tmp/l", "optimisation": "YES"},
			[]string{"attribute log is not used", "attribute optimisation is not used"}},
		{Ad{"dap_type": "transfer", "src_url": "gsiftp://a/x", "dest_url": "gsiftp://b/x", "use_history": "YES"},
			[]string{"attribute use_history is not used by Sluice for a transfer ad"}},
		{Ad{"dap_type": "estimation", "src_url": "gsiftp://a/x", "dest_url": "gsiftp://b/x", "size": "5G", "optimization": "YES"},
			[]string{"attribute optimization is not used by Sluice for an estimation ad"}},
		{Ad{"dap_type": "estimation", "src_url": "gsiftp://a/x", "dest_url": "gsiftp://b/x", "size": "5G", "use_history": "YES"}, nil},
	} {
		a, err := Check(tt.ad)
		if err != nil {
			t.Fatalf("Check(%v): %v", tt.ad, err)
		}
		all := strings.Join(a.Notes, "\n")
		if len(tt.want) == 0 && all != "" {
			t.Errorf("Check(%v): notes %q, want none", tt.ad, all)
		}
		for _, w := range tt.want {
			if !strings.Contains(all, w) {
				t.Errorf("Check(%v): notes %q, want %q", tt.ad, all, w)
			}
		}
	}
}
