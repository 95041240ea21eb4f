package copyjob

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrBusy is returned by Lock when another process runs the same copy.
var ErrBusy = errors.New("the same copy is running")

// Lock claims the copy of srcs to dst in journalDir for this process, and
// returns its release. Two runs of one copy at once would share every
// temporary file and journal: each would remove or rename the other's
// work, and both fail with messages that say nothing of why. So the
// second is refused at once, naming the first's process.
//
// The claim is an advisory lock on a file in the journal directory, which
// the kernel drops when the process ends however it ends (kill -9
// included): a rerun after a crash is never refused. Copies of other
// sources, or to another destination, do not contend.
func Lock(journalDir string, srcs []Endpoint, dst Endpoint) (release func(), err error) {
	var b strings.Builder
	for _, s := range srcs {
		b.WriteString(s.URL)
		b.WriteByte(0)
	}
	b.WriteString("->")
	b.WriteString(dst.URL)
	h := sha256.Sum256([]byte(b.String()))
	if err := os.MkdirAll(journalDir, 0o700); err != nil {
		return nil, fmt.Errorf("journal directory: %w", err)
	}
	p := filepath.Join(journalDir, "run-"+hex.EncodeToString(h[:12])+".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal directory: %w", err)
	}
	ok, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", p, err)
	}
	if !ok {
		holder := "another process"
		if data, rerr := os.ReadFile(p); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(data))); perr == nil && pid > 0 {
				holder = fmt.Sprintf("process %d", pid)
			}
		}
		f.Close()
		return nil, fmt.Errorf("%w: %s is copying %s to %s; wait for it to end (or stop it, then run this again to resume)",
			ErrBusy, holder, sourceNames(srcs), dst.URL)
	}
	// Who holds it, for the message of a second run.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil // closing drops the lock; the file stays for the next run
}

func sourceNames(srcs []Endpoint) string {
	if len(srcs) == 1 {
		return srcs[0].URL
	}
	return fmt.Sprintf("%s and %d more", srcs[0].URL, len(srcs)-1)
}
