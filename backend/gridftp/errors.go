package gridftp

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluice-dtn/sluice/backend"
)

// ErrNoGSIControl is returned by the operations that need this package's
// own FTP control connection (Stat, List, Rename, Remove, Mkdir,
// Truncate) on a gsiftp:// backend. A gsiftp control channel must be
// authenticated with GSI (GSSAPI over TLS with X.509 proxy certificates,
// RFC 2228 AUTH/ADAT), which only the Globus C libraries implement; this
// package drives those libraries through globus-url-copy, and
// globus-url-copy offers no way to stat, rename or delete. Data transfers
// (OpenRange, WriteAt, Download, Upload, PullFrom) and Checksum (computed
// by streaming the file) do work over gsiftp://; Sync does nothing
// there. It wraps backend.ErrInvalid, so the engine does not retry it,
// and errors.ErrUnsupported.
var ErrNoGSIControl = fmt.Errorf("%w: gsiftp:// metadata operations need a GSI-authenticated control channel, "+
	"which this backend does not implement (only data transfers through globus-url-copy and streamed checksums work over gsiftp://; "+
	"use an ftp:// endpoint of the same server for metadata): %w", backend.ErrInvalid, errors.ErrUnsupported)

// ReplyError is a failure reply of an FTP server to one command on this
// package's control connection. It unwraps to the backend sentinel error
// the reply means (see classify), or to nothing for transient failures.
type ReplyError struct {
	Cmd  string // the command, without its argument when that is a path
	Code int    // FTP reply code
	Msg  string // reply text, continuation lines joined with "; "
}

func (e *ReplyError) Error() string {
	return fmt.Sprintf("%s: %d %s", e.Cmd, e.Code, e.Msg)
}

// Unwrap returns the sentinel error for the reply.
func (e *ReplyError) Unwrap() error { return classify(e.Code, e.Msg) }

// ToolError is a globus-url-copy run that failed: a non-zero exit status,
// with what it printed on stderr. It unwraps to the backend sentinel
// error its message means, judged like a ReplyError from the server reply
// it quotes.
type ToolError struct {
	Args   []string // the command line, without the binary
	Status string   // how it ended ("exit status 1")
	Stderr string   // what it printed, condensed to one line
}

func (e *ToolError) Error() string {
	msg := e.Stderr
	if msg == "" {
		msg = "(no message)"
	}
	return fmt.Sprintf("globus-url-copy %s: %s", e.Status, msg)
}

// Unwrap returns the sentinel error for the message.
func (e *ToolError) Unwrap() error {
	code := 0
	if m := toolReply.FindStringSubmatch(e.Stderr); m != nil {
		code, _ = strconv.Atoi(m[1])
	}
	return classify(code, e.Stderr)
}

// toolReply finds the server reply globus-url-copy quotes in its error
// message ("the server responded with an error; 500 500-Command failed").
var toolReply = regexp.MustCompile(`responded with an error[;:]?\s*([1-5][0-9][0-9])[ -]`)

// gridftpErrno is the errno globus-gridftp-server puts in its replies
// ("550-GridFTP-Errno: 2").
var gridftpErrno = regexp.MustCompile(`GridFTP-Errno: ([0-9]+)`)

// errnoKinds maps the system errors a GridFTP server reports, by number
// or by their strerror text, to the backend's sentinels, the same mapping
// backend/file applies to local errors.
var errnoKinds = []struct {
	errno syscall.Errno
	kind  error
}{
	{syscall.ENOENT, backend.ErrNotFound},
	{syscall.EACCES, backend.ErrPermission},
	{syscall.EPERM, backend.ErrPermission},
	{syscall.EROFS, backend.ErrPermission},
	{syscall.ENOSPC, backend.ErrNoSpace},
	{syscall.EDQUOT, backend.ErrNoSpace},
	{syscall.EFBIG, backend.ErrNoSpace},
	{syscall.EEXIST, backend.ErrExist},
	{syscall.ENOTEMPTY, backend.ErrExist},
	{syscall.ENOTDIR, backend.ErrInvalid},
	{syscall.EISDIR, backend.ErrInvalid},
	{syscall.EINVAL, backend.ErrInvalid},
	{syscall.ENAMETOOLONG, backend.ErrInvalid},
}

// classify maps an FTP reply (or a globus-url-copy message quoting one;
// code 0 if none was found) to a backend sentinel error, or nil if
// retrying may help. The reply codes alone are too coarse: the Globus
// server answers 500 for a file it cannot open whatever the reason, 553
// for a directory that already exists and 451 for one that is not empty.
// So the errno the server names comes first, then refused logins, then
// the system error text, then the code.
func classify(code int, msg string) error {
	if m := gridftpErrno.FindStringSubmatch(msg); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			for _, k := range errnoKinds {
				if k.errno == syscall.Errno(n) {
					return k.kind
				}
			}
		}
	}
	if code >= 530 && code <= 535 {
		// Not logged in, security refused: GSI diagnostics that follow
		// may name missing credential files, which is not ErrNotFound.
		return backend.ErrPermission
	}
	low := strings.ToLower(msg)
	for _, k := range errnoKinds {
		if strings.Contains(low, strings.ToLower(k.errno.Error())) {
			return k.kind
		}
	}
	switch {
	case strings.Contains(low, "unknown checksum algorithm"):
		return backend.ErrInvalid
	case strings.Contains(low, "credential"), strings.Contains(low, "authenticat"), strings.Contains(low, "not logged in"):
		return backend.ErrPermission
	}
	switch code {
	case 550:
		return backend.ErrNotFound // RFC 959: file unavailable (not found, no access)
	case 552:
		return backend.ErrNoSpace // exceeded storage allocation
	case 553, 501, 502, 504:
		return backend.ErrInvalid // name not allowed, bad parameters, not implemented
	}
	return nil
}

// condense makes a multi-line message one line, for error strings, and
// bounds it: globus-url-copy can print pages of GSI diagnostics.
func condense(s string, max int) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	s = strings.Join(parts, "; ")
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}
