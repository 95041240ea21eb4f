package webdav

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/internal/storagetest"
)

// TestOpen checks the URL forms and the credentials Open takes, and
// those it refuses before anything is sent.
func TestOpen(t *testing.T) {
	for _, tc := range []struct {
		loc      string
		cred     *backend.Credential
		wantBase string // "": refused with ErrInvalid
		wantPath string
	}{
		{loc: "davs://se.example.org/data/f", wantBase: "https://se.example.org", wantPath: "/data/f"},
		{loc: "dav://se.example.org:8080/data/", wantBase: "http://se.example.org:8080", wantPath: "/data/"},
		{loc: "https://se.example.org:8443", wantBase: "https://se.example.org:8443", wantPath: "/"},
		{loc: "http://se.example.org/a%20b", wantBase: "http://se.example.org", wantPath: "/a b"},
		{loc: "davs://se.example.org/f", cred: &backend.Credential{Token: "tok"}, wantBase: "https://se.example.org", wantPath: "/f"},
		{loc: "davs://se.example.org/f", cred: &backend.Credential{Username: "u", Password: "p"}, wantBase: "https://se.example.org", wantPath: "/f"},
		{loc: "dav://se.example.org/f", cred: &backend.Credential{Username: "u", Password: "p"}},              // a password in the clear
		{loc: "davs://se.example.org/f", cred: &backend.Credential{Username: "u"}},                            // no password
		{loc: "davs://se.example.org/f", cred: &backend.Credential{X509Proxy: "-----BEGIN"}},                  // cannot present it
		{loc: "davs://se.example.org/f", cred: &backend.Credential{Token: "t", Username: "u", Password: "p"}}, // which one?
		{loc: "davs://u:p@se.example.org/f"},
		{loc: "davs:///f"},
		{loc: "davs://se.example.org/f?x=1"},
	} {
		o, err := Open(t.Context(), tc.loc, backend.OpenOptions{Credential: tc.cred})
		if tc.wantBase == "" {
			if !errors.Is(err, backend.ErrInvalid) {
				t.Errorf("Open(%s, %v): %v, want ErrInvalid", tc.loc, tc.cred, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%s, %v): %v", tc.loc, tc.cred, err)
			continue
		}
		b := o.Backend.(*Backend)
		if b.base != tc.wantBase || o.Path != tc.wantPath || o.URL != tc.loc {
			t.Errorf("Open(%s) = base %s, path %q, URL %s; want %s, %q", tc.loc, b.base, o.Path, o.URL, tc.wantBase, tc.wantPath)
		}
		if (tc.cred != nil && tc.cred.Token != "") != (o.Tokens != nil) {
			t.Errorf("Open(%s, %v): tokens %v", tc.loc, tc.cred, o.Tokens != nil)
		}
		o.Close()
	}
}

// TestURL checks that names reach the server as names: escaped segment
// by segment, ".." resolved inside the root.
func TestURL(t *testing.T) {
	b, err := New("https://se.example.org/root%20dir/", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    string
		dir  bool
		want string
	}{
		{"/a/b", false, "https://se.example.org/root%20dir/a/b"},
		{"a/b", true, "https://se.example.org/root%20dir/a/b/"},
		{"/", true, "https://se.example.org/root%20dir/"},
		{"../../etc/passwd", false, "https://se.example.org/root%20dir/etc/passwd"},
		{"/q?x#y%41 z", false, "https://se.example.org/root%20dir/q%3Fx%23y%2541%20z"},
	} {
		if got := b.url(tc.p, tc.dir); got != tc.want {
			t.Errorf("url(%q, %v) = %s, want %s", tc.p, tc.dir, got, tc.want)
		}
	}
	for _, tc := range []struct{ href, want string }{
		{"/root%20dir/a/b", "/a/b"},
		{"/root dir/a/", "/a"},
		{"https://se.example.org/root%20dir/", "/"},
		{"/root%20dir/100%", "/100%"}, // left unescaped by the server
	} {
		if got, err := b.hrefPath(tc.href); err != nil || got != tc.want {
			t.Errorf("hrefPath(%q) = %q, %v; want %q", tc.href, got, err, tc.want)
		}
	}
	if _, err := b.hrefPath("/elsewhere/a"); err == nil {
		t.Error("hrefPath of a path outside the root succeeded")
	}
}

// TestMarkers reads the answers of third-party copies.
func TestMarkers(t *testing.T) {
	marker := func(stripe, n int) string {
		return "Perf Marker\nTimestamp: 1796669935\nStripe Index: " + itoa(stripe) + "\nStripe Bytes Transferred: " + itoa(n) + "\nTotal Stripe Count: 2\nEnd\n"
	}
	for _, tc := range []struct {
		name     string
		body     string
		want     []int64
		wantErr  error  // a sentinel; nil with wantText "" for success
		wantText string // what the error says
	}{
		{"success", marker(0, 0) + marker(0, 100) + marker(0, 250) + "success: Created\n", []int64{100, 250}, nil, ""},
		{"stripes summed", marker(0, 100) + marker(1, 50) + marker(0, 200) + "success: Created\n", []int64{100, 150, 250}, nil, ""},
		{"missing source", marker(0, 0) + "failure: Remote side failed with status code 404; error message: \"no such file\"\n", nil, backend.ErrNotFound, "status code 404"},
		{"refused", "failure: Remote side failed with status code 403\n", nil, backend.ErrPermission, "403"},
		{"unreachable", "failure: Couldn't connect to server\n", nil, nil, "could not reach the other server"},
		{"cut short", marker(0, 10), []int64{10}, nil, "without success or failure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int64
			resp := &http.Response{Body: io.NopCloser(strings.NewReader(tc.body))}
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			_, err := readMarkers(resp, timer, time.Hour, func(n int64) { got = append(got, n) })
			switch {
			case tc.wantErr == nil && tc.wantText == "":
				if err != nil {
					t.Errorf("error %v", err)
				}
			case err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || !strings.Contains(err.Error(), tc.wantText):
				t.Errorf("error %v, want one wrapping %v saying %q", err, tc.wantErr, tc.wantText)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("progress %v, want %v", got, tc.want)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestDigest decodes Digest values as servers write them.
func TestDigest(t *testing.T) {
	for _, tc := range []struct{ algo, val, want string }{
		{"adler32", "3fe7404c", "3fe7404c"},
		{"adler32", "P+dATA==", "3fe7404c"},
		{"md5", "0b3CpFvNz/Y1RC0oDNLq5g==", "d1bdc2a45bcdcff635442d280cd2eae6"},
		{"md5", "d1bdc2a45bcdcff635442d280cd2eae6", "d1bdc2a45bcdcff635442d280cd2eae6"},
		{"crc32c", "0a0b0c0d", "0a0b0c0d"},
		{"crc32c", "CgsMDQ==", "0a0b0c0d"},
	} {
		if got, err := decodeDigest(tc.algo, tc.val); err != nil || got != tc.want {
			t.Errorf("decodeDigest(%s, %s) = %q, %v; want %q", tc.algo, tc.val, got, err, tc.want)
		}
	}
	if _, err := decodeDigest("md5", "short"); err == nil {
		t.Error("a digest of the wrong size was taken")
	}
}

// TestIgnoredRange reads ranges from an nginx that ignores Range
// (max_ranges 0: every GET is answered 200 with the whole file): the
// bytes are the range's, never the file's start.
func TestIgnoredRange(t *testing.T) {
	srv := storagetest.WebDAV(t, storagetest.WebDAVOptions{Config: []string{"max_ranges 0;"}})
	data := random(200_000, 3)
	srv.Put(t, "f", data)
	b, err := New(srv.URL, Options{Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, r := range [][2]int64{{0, -1}, {0, 10}, {12_345, 50_000}, {199_999, 1}, {150_000, -1}} {
		rc, err := b.OpenRange(ctxFor(t), "/f", r[0], r[1])
		if err != nil {
			t.Fatalf("OpenRange(%d, %d): %v", r[0], r[1], err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		end := int64(len(data))
		if r[1] >= 0 {
			end = r[0] + r[1]
		}
		if err != nil || !bytes.Equal(got, data[r[0]:end]) {
			t.Errorf("OpenRange(%d, %d): %d bytes, %v; want the range's %d", r[0], r[1], len(got), err, end-r[0])
		}
	}
}

// TestCredentials checks that a token and a login reach nginx, and that
// without them it refuses with ErrPermission.
func TestCredentials(t *testing.T) {
	for _, tc := range []struct {
		name string
		srv  storagetest.WebDAVOptions
		good Options
		bad  Options
	}{
		{"token", storagetest.WebDAVOptions{Token: "s3cr3t"},
			Options{Token: backend.StaticToken("s3cr3t")}, Options{Token: backend.StaticToken("wrong")}},
		{"basic over TLS", storagetest.WebDAVOptions{TLS: true, Username: "alice", Password: "pw"},
			Options{Username: "alice", Password: "pw"}, Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := storagetest.WebDAV(t, tc.srv)
			for _, o := range []struct {
				opts Options
				ok   bool
			}{{tc.good, true}, {tc.bad, false}} {
				o.opts.Client = srv.Client()
				b, err := New(srv.URL, o.opts)
				if err != nil {
					t.Fatal(err)
				}
				c := ctxFor(t)
				werr := b.WriteAt(c, "/d/f", 0, strings.NewReader("data"), 4)
				_, serr := b.Stat(c, "/d/f")
				if o.ok && (werr != nil || serr != nil) {
					t.Errorf("with the credential: WriteAt %v, Stat %v", werr, serr)
				}
				if !o.ok && (!errors.Is(werr, backend.ErrPermission) || !errors.Is(serr, backend.ErrPermission)) {
					t.Errorf("without the credential: WriteAt %v, Stat %v; want ErrPermission", werr, serr)
				}
				b.Close()
			}
		})
	}
	// A password over plain HTTP is refused before anything is sent,
	// unless a test lets it through.
	if _, err := New("http://127.0.0.1:1", Options{Username: "u", Password: "p"}); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("basic authentication over plain HTTP: %v, want ErrInvalid", err)
	}
	if _, err := New("http://127.0.0.1:1", Options{Username: "u", Password: "p", InsecureBasicAuth: true}); err != nil {
		t.Errorf("basic authentication over plain HTTP, allowed: %v", err)
	}
}
