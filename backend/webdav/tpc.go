package webdav

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// HTTP third-party copy (WLCG's HTTP-TPC, as XRootD's XrdHttpTPC,
// dCache, EOS and StoRM serve it): a WebDAV COPY sent to one server
// names the other in a header, and the first moves the bytes itself.
//
//   - pull mode: COPY to the destination with "Source: <source URL>";
//     the destination GETs the file from the source;
//   - push mode: COPY to the source with "Destination: <destination
//     URL>"; the source PUTs the file onto the destination.
//
// Credentials for the other server travel as TransferHeader<Name>
// headers, which the server sends on as <Name>. The answer (201 or 202)
// streams performance markers while the copy runs, every few seconds:
//
//	Perf Marker
//	Timestamp: 1796669935
//	Stripe Index: 0
//	Stripe Bytes Transferred: 5242880
//	Total Stripe Count: 1
//	End
//
// and ends with one line, "success: ..." or "failure: ...": the status
// line only says the copy started.

// defaultMarkerTimeout is Options.MarkerTimeout's default.
const defaultMarkerTimeout = 2 * time.Minute

// CopyFileFrom has a server copy the whole file srcPath of src's server
// to dstPath of b's by an HTTP third-party copy: b's server pulls it
// (or, with b's Options.Push, src's server pushes it); the bytes go from
// server to server, none through this process. The destination's parent
// directories are made first (servers do not make them for a copy), and
// a file at dstPath is replaced. progress, if not nil, is called with
// the bytes the markers report, increasing, and with the file's size
// once the copy has succeeded. src must be an HTTP server too
// (backend.ErrInvalid otherwise).
//
// A missing source is backend.ErrNotFound, a refusal by either server
// backend.ErrPermission; a source the destination cannot reach is an
// error that says so. When ctx ends the request's connection is closed
// and CopyFileFrom returns at once; whether the server then stops its
// copy is its own affair (HTTP-TPC has no cancel request), so what it
// had written may stay at dstPath.
func (b *Backend) CopyFileFrom(ctx context.Context, src backend.Backend, srcPath, dstPath string, progress func(int64)) error {
	s, ok := src.(*Backend)
	if !ok {
		return fmt.Errorf("webdav: third-party copy from %T: %w: the source is not an HTTP server", src, backend.ErrInvalid)
	}
	srcURL, dstURL := s.url(srcPath, false), b.url(dstPath, false)
	what := "third-party copy " + srcURL + " to " + dstURL
	if clean(dstPath) == "/" || clean(srcPath) == "/" {
		return fmt.Errorf("webdav: %s: %w: the root", what, backend.ErrInvalid)
	}
	if err := b.Mkdir(ctx, path.Dir(clean(dstPath))); err != nil {
		return fmt.Errorf("webdav: %s: the destination's directory: %w", what, err)
	}
	// The server that sends the COPY presents the other's credential.
	asker, other, hdr := b, s, http.Header{"Source": {srcURL}}
	if b.o.Push {
		asker, other, hdr = s, b, http.Header{"Destination": {dstURL}}
	}
	hdr.Set("Overwrite", "T")
	auth, err := other.authorization()
	if err != nil {
		return fmt.Errorf("webdav: %s: %w", what, err)
	}
	if auth != "" {
		if other.o.Username != "" && !strings.HasPrefix(other.base, "https:") {
			return fmt.Errorf("webdav: %s: %w: a password for plain HTTP", what, backend.ErrInvalid)
		}
		// Set as spelled, not in Go's canonical form
		// (Transferheaderauthorization): XRootD matches the
		// "TransferHeader" prefix case-sensitively.
		hdr["TransferHeaderAuthorization"] = []string{auth}
	}
	u := dstURL
	if b.o.Push {
		u = srcURL
	}

	// A copy that stops sending markers is given up: the context of
	// the request ends when no line has come for the timeout.
	timeout := asker.o.MarkerTimeout
	if timeout <= 0 {
		timeout = defaultMarkerTimeout
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errStalled := fmt.Errorf("no performance marker for %s", timeout)
	stall := time.AfterFunc(timeout, func() { cancel(errStalled) })
	defer stall.Stop()

	resp, err := asker.do(rctx, "COPY", u, hdr, nil, 0)
	if err != nil {
		return fmt.Errorf("webdav: %s: %w", what, err)
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusAccepted {
		if resp.StatusCode/100 == 2 {
			return fmt.Errorf("webdav: %s: answered %s: not a third-party copy's answer (does the server do HTTP-TPC?)", what, resp.Status)
		}
		return statusError("COPY "+u+" ("+what+")", resp)
	}
	last, err := readMarkers(resp, stall, timeout, progress)
	if err != nil {
		if rctx.Err() != nil {
			err = fmt.Errorf("%w: %w", err, context.Cause(rctx))
		}
		return fmt.Errorf("webdav: %s: %w", what, err)
	}
	if progress != nil {
		// The markers come every few seconds, and a short copy
		// ends before the first counts anything: the file's size
		// is the last word.
		if fi, err := b.Stat(ctx, dstPath); err == nil && fi.Size >= last {
			progress(fi.Size)
		}
	}
	return nil
}

// readMarkers reads a copy's answer to its last line: it calls progress
// with the bytes of each marker (summed over stripes), and returns the
// last of them, with nil after "success:" and an error after "failure:"
// or an answer that ends without either.
func readMarkers(resp *http.Response, stall *time.Timer, timeout time.Duration, progress func(int64)) (int64, error) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4096), 1<<20)
	stripes := map[int64]int64{}
	var index, bytes, last int64
	inMarker := false
	for sc.Scan() {
		stall.Reset(timeout)
		line := strings.TrimSpace(sc.Text())
		key, val, _ := strings.Cut(line, ":")
		val = strings.TrimSpace(val)
		switch {
		case line == "Perf Marker":
			inMarker, index, bytes = true, 0, -1
		case inMarker && key == "Stripe Index":
			index, _ = strconv.ParseInt(val, 10, 64)
		case inMarker && key == "Stripe Bytes Transferred":
			if n, err := strconv.ParseInt(val, 10, 64); err == nil {
				bytes = n
			}
		case inMarker && line == "End":
			inMarker = false
			if bytes < 0 {
				continue
			}
			stripes[index] = bytes
			var sum int64
			for _, n := range stripes {
				sum += n
			}
			if sum > last {
				last = sum
				if progress != nil {
					progress(sum)
				}
			}
		case strings.HasPrefix(line, "success:"):
			return last, nil
		case strings.HasPrefix(line, "failure:"):
			return last, copyFailure(val)
		}
	}
	if err := sc.Err(); err != nil {
		return last, fmt.Errorf("reading the copy's performance markers: %w", err)
	}
	return last, errors.New("the copy's answer ended without success or failure")
}

// copyFailure classifies the message of a "failure:" line. Servers pass
// on the other server's status (XRootD: "Remote side failed with status
// code 404"), or libcurl's words when it could not reach it.
func copyFailure(msg string) error {
	err := fmt.Errorf("the server's copy failed: %s", msg)
	low := strings.ToLower(msg)
	for _, c := range []struct {
		codes []string
		kind  error
	}{
		{[]string{"status code 404", "status code 410"}, backend.ErrNotFound},
		{[]string{"status code 401", "status code 403"}, backend.ErrPermission},
		{[]string{"status code 507"}, backend.ErrNoSpace},
	} {
		for _, code := range c.codes {
			if strings.Contains(low, code) {
				return fmt.Errorf("%w (%w)", err, c.kind)
			}
		}
	}
	for _, s := range []string{"couldn't connect", "could not connect", "connection refused", "couldn't resolve", "could not resolve", "timed out", "timeout", "ssl", "certificate", "no route to host"} {
		if strings.Contains(low, s) {
			return fmt.Errorf("%w (the server doing the copy could not reach the other server)", err)
		}
	}
	return err
}
