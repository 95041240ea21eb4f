package root

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/backendtest"
)

// TestConformance runs the backend conformance suite against every server
// targets starts (go-hep's and, when installed, the real xrootd), the
// backend rooted (Options.Root) at a directory below what the server
// exports: ".." must not reach the rest of the server's namespace.
func TestConformance(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			var env backendtest.Env
			backendtest.Run(t, backendtest.Fixture{
				New: func(t *testing.T) backendtest.Env {
					seed(t, tg, map[string]string{"conformance/": ""})
					b := open(t, tg, Options{Root: "/conformance"})
					env = backendtest.Env{B: b, Dir: "/", Local: filepath.Join(tg.dir, "conformance")}
					return env
				},
				Deny: func(t *testing.T, dir string) (backend.Backend, string) {
					if os.Geteuid() == 0 && (tg.x == nil || !tg.x.RunsAsOtherUser()) {
						// xrootd runs as its own user; go-hep's
						// server runs in this process.
						return nil, tg.name + "'s server runs as root, whom file permissions do not stop"
					}
					local := filepath.Join(env.Local, filepath.FromSlash(dir))
					if err := os.Chmod(local, 0); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { os.Chmod(local, 0o755) })
					return env.B, ""
				},
				Lacks: backendtest.Lacks{
					RangeChecksummer: "XRootD's checksum query (kXR_Qcksum) has no range",
					ExistingWriter:   "not implemented yet (an open with kXR_open_updt alone, which fails on a missing file, would give it)",
					NoReplaceRenamer: "kXR_mv replaces the target, and XRootD has no rename that does not",
					ModTimeSetter:    "not implemented yet",
					Names: map[string]string{
						backendtest.QuestionMark: "'?' starts XRootD's opaque data (CGI)",
						backendtest.Newline:      "a newline ends an entry of an XRootD directory listing",
					},
				},
			})
		})
	}
}
