package gridftp

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/backendtest"
)

// TestConformance runs the backend conformance suite against a real
// globus-gridftp-server, the backend rooted at a directory below the
// server's test directory (whose parent, /tmp, is not the test's own):
// with one stream, where reads and writes go over the control connection,
// and with four, where every transfer is globus-url-copy's.
func TestConformance(t *testing.T) {
	for _, par := range []int{1, 4} {
		t.Run(fmt.Sprintf("p=%d", par), func(t *testing.T) { testConformance(t, Options{Parallelism: par}) })
	}
}

func testConformance(t *testing.T, opts Options) {
	var env backendtest.Env
	backendtest.Run(t, backendtest.Fixture{
		New: func(t *testing.T) backendtest.Env {
			s := startServer(t)
			root := s.local("root")
			if err := os.Mkdir(root, 0o777); err != nil {
				t.Fatal(err)
			}
			os.Chmod(root, 0o777) // the server may run as nobody
			b, err := New(s.url("ftp")+"/root", opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			env = backendtest.Env{B: b, Dir: "/", Local: root}
			return env
		},
		// The server runs as nobody when the tests run as root, and as
		// the tests' user otherwise: a directory of mode 0 is closed to
		// it either way.
		Deny: func(t *testing.T, dir string) (backend.Backend, string) {
			local := filepath.Join(env.Local, filepath.FromSlash(dir))
			if err := os.Chmod(local, 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(local, 0o777) })
			return env.B, ""
		},
		Lacks: backendtest.Lacks{
			RangeChecksummer: "not implemented yet (CKSM takes an offset and a length; Checksum sends 0 -1)",
			ExistingWriter:   "FTP has no write that fails on a missing file (ESTO and STOR create it); a check first would race",
			NoReplaceRenamer: "RNFR/RNTO replaces the target, and FTP has no rename that does not",
			ModTimeSetter:    "not implemented yet",
			Names: map[string]string{
				backendtest.NonASCII: "globus-gridftp-server drops non-ASCII bytes from names (Options.UTF8 is for servers that keep them)",
				backendtest.Newline:  "an FTP command ends at CR LF: a name holding one would inject commands",
			},
		},
	})
}
