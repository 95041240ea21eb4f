package gridftp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/internal/storagetest"
)

// Passwords of the tests' users. The server compares only the first 8
// bytes (DES crypt), so the wrong one differs in them; the right one has
// bytes a URL must percent-encode.
const (
	alicePass = "p@s:/%#x"
	wrongPass = "q@s:/%#x"
)

// recordingBinary is a globus-url-copy that writes its command line and
// X509_USER_PROXY (and the proxy file's mode and content) to log, one run
// a paragraph, then runs the real one: what any local user could see of
// a run (ps shows command lines) is checked to hold no password.
func recordingBinary(t *testing.T) (bin, log string) {
	t.Helper()
	real, err := exec.LookPath("globus-url-copy")
	if err != nil {
		t.Skip("globus-url-copy not installed")
	}
	dir := t.TempDir()
	log = filepath.Join(dir, "runs.log")
	bin = filepath.Join(dir, "globus-url-copy")
	script := `#!/bin/sh
{
	echo "args: $*"
	echo "proxy: $X509_USER_PROXY"
	if [ -n "$X509_USER_PROXY" ]; then
		stat -c 'mode: %a' "$X509_USER_PROXY"
		echo "content: $(cat "$X509_USER_PROXY")"
	fi
	echo
} >>'` + log + `'
exec '` + real + `' "$@"
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

// passwordServer is a server that takes only alice's login.
func passwordServer(t *testing.T) *testServer {
	t.Helper()
	return wrapServer(storagetest.GridFTP(t, storagetest.GridFTPOptions{Users: map[string]string{"alice": alicePass}}))
}

// TestPasswordLogin moves files both ways as a user with a password,
// through this package's own data connections (Open's backend: one
// stream) and through globus-url-copy (parallel streams, and the
// multi-file runs), and stats, renames and removes them.
func TestPasswordLogin(t *testing.T) {
	s := passwordServer(t)
	bin, runs := recordingBinary(t)
	cred := &backend.Credential{Username: "alice", Password: alicePass}
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"native", Options{Parallelism: 1, Binary: bin}},
		{"globus-url-copy", Options{Parallelism: 2, Binary: bin}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			tc.opts.Credential = cred
			b, err := New(s.url("ftp"), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			dir := tc.name + "/"
			up := randomBytes(3<<20+17, 1)
			if err := b.WriteAt(ctx, dir+"up.bin", 0, bytes.NewReader(up), int64(len(up))); err != nil {
				t.Fatal(err)
			}
			if got := s.readLocal(t, dir+"up.bin"); !bytes.Equal(got, up) {
				t.Fatalf("uploaded file: %s", firstDiff(got, up))
			}
			down := randomBytes(2<<20+5, 2)
			s.put(t, dir+"down.bin", down, true)
			rc, err := b.OpenRange(ctx, dir+"down.bin", 1000, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			if want := down[1000 : 1000+1<<20]; !bytes.Equal(got, want) {
				t.Fatalf("range read: %s", firstDiff(got, want))
			}
			fi, err := b.Stat(ctx, dir+"up.bin")
			if err != nil || fi.Size != int64(len(up)) {
				t.Fatalf("stat: %+v, %v", fi, err)
			}
			if err := b.Rename(ctx, dir+"up.bin", dir+"moved/up.bin"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Stat(ctx, dir+"up.bin"); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("stat after the rename: %v, want ErrNotFound", err)
			}
			// Many files in one run: a list globus-url-copy reads.
			local := t.TempDir()
			files := []FilePair{{dir + "down.bin", filepath.Join(local, "a")}, {dir + "moved/up.bin", filepath.Join(local, "b")}}
			if err := b.Download(ctx, files); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(local, "b")); !bytes.Equal(got, up) {
				t.Errorf("downloaded file: %s", firstDiff(got, up))
			}
			back := []FilePair{{dir + "again/a", filepath.Join(local, "a")}, {dir + "again/b", filepath.Join(local, "b")}}
			if err := b.Upload(ctx, back); err != nil {
				t.Fatal(err)
			}
			if got := s.readLocal(t, dir+"again/a"); !bytes.Equal(got, down) {
				t.Errorf("uploaded list's file: %s", firstDiff(got, down))
			}
			if err := b.Remove(ctx, dir+"moved/up.bin"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(s.local(dir + "moved/up.bin")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("removed file: %v", err)
			}
		})
	}
	log, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "args:") {
		t.Fatal("globus-url-copy never ran")
	}
	for _, secret := range []string{alicePass, escape(alicePass), "alice"} {
		if strings.Contains(string(log), secret) {
			t.Errorf("a command line held %q:\n%s", secret, log)
		}
	}
}

// TestPasswordRefused: a wrong or missing password, or none at all, is
// ErrPermission on the control connection and in globus-url-copy alike,
// and the password is in no message.
func TestPasswordRefused(t *testing.T) {
	s := passwordServer(t)
	s.put(t, "f", []byte("data"), true)
	for _, tc := range []struct {
		name string
		cred *backend.Credential
	}{
		{"wrong password", &backend.Credential{Username: "alice", Password: wrongPass}},
		{"no password", &backend.Credential{Username: "alice"}},
		{"unknown user", &backend.Credential{Username: "bob", Password: alicePass}},
		{"anonymous", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			b, err := New(s.url("ftp"), Options{Parallelism: 2, Credential: tc.cred})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			_, serr := b.Stat(ctx, "f")
			_, rerr := b.OpenRange(ctx, "f", 0, -1) // globus-url-copy: Parallelism 2
			derr := b.Download(ctx, []FilePair{{"f", filepath.Join(t.TempDir(), "f")}, {"f", filepath.Join(t.TempDir(), "g")}})
			for _, err := range []error{serr, rerr, derr} {
				if !errors.Is(err, backend.ErrPermission) {
					t.Errorf("%v: want ErrPermission", err)
				}
				if err != nil && tc.cred != nil && tc.cred.Password != "" &&
					(strings.Contains(err.Error(), tc.cred.Password) || strings.Contains(err.Error(), escape(tc.cred.Password))) {
					t.Errorf("%v: shows the password", err)
				}
			}
		})
	}
}

// TestAnonymousStillWorks: without a credential, an anonymous server
// serves as before, through Open.
func TestAnonymousStillWorks(t *testing.T) {
	s := startServer(t)
	s.put(t, "f", []byte("anonymous bytes"), true)
	ctx := ctxT(t)
	o, err := Open(ctx, s.URL("ftp", "f"), backend.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	rc, err := o.Backend.OpenRange(ctx, o.Path, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	if err := rc.Close(); err != nil || string(got) != "anonymous bytes" {
		t.Errorf("read %q, %v", got, err)
	}
}

// TestCredentialRefused: what a scheme cannot present is refused up
// front with ErrInvalid, naming the field but never its value.
func TestCredentialRefused(t *testing.T) {
	needTools(t)
	for _, tc := range []struct {
		name, url string
		cred      backend.Credential
		why       string
	}{
		{"token over ftp", "ftp://127.0.0.1:1/", backend.Credential{Token: "tok-secret"}, "token"},
		{"token over gsiftp", "gsiftp://127.0.0.1:1/", backend.Credential{Token: "tok-secret"}, "token"},
		{"token with a password", "ftp://127.0.0.1:1/", backend.Credential{Username: "u", Password: "pw-secret", Token: "tok-secret"}, "token"},
		{"password over gsiftp", "gsiftp://127.0.0.1:1/", backend.Credential{Username: "u", Password: "pw-secret"}, "password"},
		{"proxy over ftp", "ftp://127.0.0.1:1/", backend.Credential{Username: "u", Password: "pw-secret", X509Proxy: "PEM-secret"}, "X.509"},
		{"password without user", "ftp://127.0.0.1:1/", backend.Credential{Password: "pw-secret"}, "user name"},
		{"CR LF in the password", "ftp://127.0.0.1:1/", backend.Credential{Username: "u", Password: "x\r\nDELE f"}, "CR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(context.Background(), tc.url, backend.OpenOptions{Credential: &tc.cred})
			if !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("%v: want ErrInvalid about the %s", err, tc.why)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "DELE") {
				t.Errorf("%v: shows a secret", err)
			}
		})
	}
}

// TestX509Proxy: a gsiftp:// backend's proxy is in a 0600 file that
// X509_USER_PROXY names for globus-url-copy, removed by Close.
func TestX509Proxy(t *testing.T) {
	bin, runs := recordingBinary(t)
	const pem = "-----BEGIN CERTIFICATE-----PROXY-----END CERTIFICATE-----"
	b, err := New("gsiftp://127.0.0.1:1/data", Options{
		Binary:     bin,
		TempDir:    t.TempDir(),
		Stall:      2 * time.Second,
		Credential: &backend.Credential{X509Proxy: pem},
	})
	if err != nil {
		t.Fatal(err)
	}
	proxy := b.proxy
	if fi, err := os.Stat(proxy); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("proxy file: %v, %v", fi, err)
	}
	// No server listens: the run fails, after it was recorded.
	if _, err := b.OpenRange(ctxT(t), "f", 0, 10); err == nil {
		t.Error("read from no server succeeded")
	}
	log, _ := os.ReadFile(runs)
	for _, want := range []string{"proxy: " + proxy, "mode: 600", "content: " + pem} {
		if !strings.Contains(string(log), want) {
			t.Errorf("globus-url-copy's run lacks %q:\n%s", want, log)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(proxy); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("proxy file after Close: %v", err)
	}
}

// TestPullProgress: a third-party copy between two servers (the source
// needs a password, the destination is anonymous) reports the bytes
// moved, increasing, ending at the range's length, before it returns.
func TestPullProgress(t *testing.T) {
	src := passwordServer(t)
	dst := startServer(t)
	data := randomBytes(12<<20+3, 5)
	src.put(t, "big", data, true)
	sb, err := New(src.url("ftp"), Options{Credential: &backend.Credential{Username: "alice", Password: alicePass}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	db := newBackend(t, dst, Options{})
	pull := db.PullFrom(sb)
	for _, tc := range []struct {
		name   string
		off, n int64
	}{
		{"whole", 0, int64(len(data))},
		{"middle", 1 << 20, 5<<20 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []int64
			returned := false
			err := pull(ctxT(t), "big", "out-"+tc.name, tc.off, tc.n, func(w int64) {
				if returned {
					t.Error("progress after return")
				}
				seen = append(seen, w)
			})
			returned = true
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) == 0 {
				t.Fatal("no progress reported")
			}
			for i := 1; i < len(seen); i++ {
				if seen[i] <= seen[i-1] {
					t.Errorf("progress not increasing: %v", seen)
				}
			}
			if last := seen[len(seen)-1]; last != tc.n {
				t.Errorf("last progress %d, want %d (all: %v)", last, tc.n, seen)
			}
			got := dst.readLocal(t, "out-"+tc.name)
			want := append(make([]byte, tc.off), data[tc.off:tc.off+tc.n]...)
			if !bytes.Equal(got, want) {
				t.Errorf("pulled file: %s", firstDiff(got, want))
			}
		})
	}
	// A refused login at the source is ErrPermission, without the password.
	bad, err := New(src.url("ftp"), Options{Credential: &backend.Credential{Username: "alice", Password: wrongPass}})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	err = db.PullFrom(bad)(ctxT(t), "big", "refused", 0, 10, nil)
	if !errors.Is(err, backend.ErrPermission) || strings.Contains(err.Error(), wrongPass) || strings.Contains(err.Error(), escape(wrongPass)) {
		t.Errorf("pull with a wrong password: %v, want ErrPermission without the password", err)
	}
}

// TestMarkerWriter feeds markerWriter a -dbg run's stderr, cut at
// arbitrary places: the markers' totals come out (stripes added up), the
// debug output (with its password) does not, and the tool's own error
// message does.
func TestMarkerWriter(t *testing.T) {
	marker := func(stripes ...string) string {
		s := "debug: response from ftp://u:pw-secret@h:1/f:\n112-Perf Marker\r\n Timestamp:  1796668546.5\r\n"
		for i, b := range stripes {
			s += " Stripe Index: " + string(rune('0'+i)) + "\r\n Stripe Bytes Transferred: " + b + "\r\n"
		}
		return s + " Total Stripe Count: " + string(rune('0'+len(stripes))) + "\r\n112 End.\r\n\n"
	}
	stderr := "debug: starting to transfer ftp://u:pw-secret@h:1/f to ftp://h:2/g\n" +
		"debug: sending command to ftp://h:2/g:\nTYPE I\n" +
		"debug: sending command to ftp://u:pw-secret@h:1/f:\nPASS pw-secret\r\n\n" +
		marker("0") + marker("1048576") + marker("1048576") + marker("3000000", "2000000") +
		"debug: operation complete\n\nerror: globus_ftp_client: the server responded with an error\n500 Command failed.\n"
	for _, cut := range []int{1, 7, 64, len(stderr)} {
		var out bytes.Buffer
		w := &markerWriter{out: &out, moved: make(chan struct{}, 1)}
		var totals []int64
		for i := 0; i < len(stderr); i += cut {
			w.Write([]byte(stderr[i:min(i+cut, len(stderr))]))
			select {
			case <-w.moved:
				totals = append(totals, w.total())
			default:
			}
		}
		// Markers that arrive in one write are one signal.
		want := []int64{1048576, 5000000}
		if cut == len(stderr) {
			want = want[1:]
		}
		if !slices.Equal(totals, want) {
			t.Errorf("cut %d: totals %v, want %v", cut, totals, want)
		}
		kept := "error: globus_ftp_client: the server responded with an error\n500 Command failed.\n"
		if out.String() != kept {
			t.Errorf("cut %d: kept %q, want %q", cut, out.String(), kept)
		}
	}
}
