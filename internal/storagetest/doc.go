// Package storagetest starts real storage servers for tests: the
// programs sites run (XRootD's xrootd, and others), on temporary
// directories and loopback ports, so that a backend is tested against
// what it will meet rather than against a stand-in written in Go.
//
// Each server is started for one test and stopped by the test's cleanup;
// its logs are written to the test's log when the test fails. A test whose
// server's program is not installed is skipped, with a message that names
// the package to install (scripts/ci-deps.sh installs them all).
//
// Servers that refuse to run as root (xrootd does) are run as their
// package's own user when the tests run as root. Their directories are
// then made below os.TempDir rather than with t.TempDir, whose parent only
// the test's user may enter, and what a test puts there through the
// helpers is given to that user, so that the server can write over it.
package storagetest
