package root

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"time"

	"go-hep.org/x/hep/xrootd/xrdfs"
	"go-hep.org/x/hep/xrootd/xrdproto/query"

	"github.com/sluice-dtn/sluice/backend"
)

// Third-party copy (TPC), as xrdcp --tpc only does it (XrdCl's
// ThirdPartyCopyJob, XrdOfsTPC on the servers). The client arranges a
// rendezvous between the two servers under a key of its choosing, and the
// destination server pulls the file from the source server itself (it
// runs the program its ofs.tpc pgm names, xrdcp by default); no byte
// passes through this process.
//
//  0. Both servers are asked whether they allow third-party copies
//     (kXR_query kXR_Qconfig "tpc"), so that a refused copy fails before
//     the destination is touched.
//  1. The destination is opened for writing (and truncated) with the copy's description in
//     its opaque data: tpc.key (the key), tpc.src (the source server,
//     host:port), tpc.lfn (the file on it), tpc.stage=copy, tpc.spr and
//     tpc.tpr (both protocols, root), oss.asize (the size to expect).
//  2. A kXR_sync on that handle arms the copy.
//  3. The source is opened for reading with tpc.key, tpc.dst (the
//     destination server's host: the only one the source will let in with
//     this key) and tpc.stage=copy. The source server now holds the
//     rendezvous, good for ofs.tpc's ttl, and matches the destination's
//     own open of the file against it: the key, the file, the destination's
//     host, and the client who asked (its login name, process id and
//     host, which the destination passes on as tpc.org).
//  4. A second kXR_sync on the destination's handle runs the copy; the
//     server answers it (deferred: kXR_waitresp, then kXR_attn) when the
//     copy has ended, with its outcome.
//
// Closing the destination's handle before then cancels the copy.

// tpcPoll is how often a running copy's destination is stat'ed: its size
// for the progress callback, and a request whose answer shows that the
// server still works (the copy's own request is silent until the end, so
// without it Options.Stall could not tell a long copy from a frozen
// server).
const tpcPoll = time.Second

// errNoTPC is the text XRootD (XrdOfsTPC) answers an open with TPC opaque
// data when its configuration has no ofs.tpc.
const errNoTPC = "tpc not supported"

// CopyFrom copies the whole file srcPath of src's server to dstPath on
// b's server by an XRootD third-party copy: b's server pulls the bytes
// straight from src's, none pass through this process. The destination is
// created, with its parent directories, or replaced (a caller that must
// not leave a partial file at dstPath copies to a temporary name and
// renames it). progress, if not nil, is called about every second with
// the destination's size while the copy runs, and with the final size.
//
// Both servers must allow third-party copies (see the package
// documentation); a server that does not gives an error that says so and
// wraps backend.ErrInvalid. A missing source is backend.ErrNotFound. When
// ctx ends, CopyFrom closes the destination's handle, which makes its
// server cancel the copy, and returns at once; what the copy had written
// may stay at dstPath (a server with ofs.tpc autorm removes it).
//
// src and b must log in with the same user name: the source server
// admits the destination only on behalf of the client that set up the
// rendezvous, identified by name, process and host.
func (b *Backend) CopyFrom(ctx context.Context, src *Backend, srcPath, dstPath string, progress func(written int64)) error {
	sname, ssp, err := src.paths(srcPath)
	if err != nil {
		return err
	}
	dname, dsp, err := b.paths(dstPath)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("third-party copy root://%s/%s to root://%s/%s", src.addr, sname, b.addr, dname)
	if dname == "/" {
		return fmt.Errorf("root: %s: %w: the destination is the root", what, backend.ErrInvalid)
	}
	// XRootD's opaque data is key=value pairs joined by '&', taken as
	// they are (no escapes): a path holding '&' would break them.
	if strings.Contains(ssp, "&") || strings.Contains(dsp, "&") {
		return fmt.Errorf("root: %s: %w: a path holding '&' cannot be named in a third-party copy", what, backend.ErrInvalid)
	}
	if src.opts.Username != b.opts.Username {
		return fmt.Errorf("root: %s: %w: the two backends log in as %q and %q; the source server admits the destination only for the client that set the copy up, by its user name",
			what, backend.ErrInvalid, src.opts.Username, b.opts.Username)
	}
	dstHost, _, err := net.SplitHostPort(b.addr)
	if err != nil {
		return fmt.Errorf("root: %s: %w", what, err)
	}

	sc, err := src.conn(ctx)
	if err != nil {
		return err
	}
	dc, err := b.conn(ctx)
	if err != nil {
		return err
	}
	// Asked first, so that a refused copy leaves the destination as it
	// was (its open with the copy's description replaces it).
	for _, end := range []struct {
		c    *conn
		addr string
	}{{sc, src.addr}, {dc, b.addr}} {
		ok, err := end.c.tpcAllowed(ctx)
		if err != nil {
			return classify(what+": ask whether the server allows it,", end.addr, err)
		}
		if !ok {
			return fmt.Errorf("root: %s: %w: the server at %s does not allow third-party copies (its configuration needs ofs.tpc)",
				what, backend.ErrInvalid, end.addr)
		}
	}
	ses, err := sc.stat(ctx, ssp)
	if err != nil {
		return classify("third-party copy: stat source", "root://"+src.addr+"/"+sname, err)
	}
	if ses.IsDir() {
		return fmt.Errorf("root: %s: %w: the source is a directory", what, backend.ErrInvalid)
	}
	if err := dc.mkdirAll(ctx, path.Dir(dsp)); err != nil {
		return classify("mkdir", path.Dir(dname), err)
	}
	key, err := tpcKey()
	if err != nil {
		return fmt.Errorf("root: %s: %w", what, err)
	}

	// 1. The destination, with the copy's description.
	dcgi := "?tpc.key=" + key + "&tpc.src=" + src.addr + "&tpc.lfn=" + ssp +
		"&tpc.stage=copy&tpc.spr=root&tpc.tpr=root&oss.asize=" + strconv.FormatInt(ses.EntrySize, 10)
	df, err := dc.open(ctx, dsp+dcgi, fileMode, xrdfs.OpenOptionsOpenUpdate|xrdfs.OpenOptionsDelete)
	if err != nil {
		return tpcError(what, "open the destination", b.addr, err)
	}
	dfOpen := true
	defer func() {
		if dfOpen {
			closeFile(ctx, dc, df)
		}
	}()
	// 2. Arm it.
	if err := await0(ctx, dc, df.Sync); err != nil {
		return tpcError(what, "set up the rendezvous", b.addr, err)
	}
	// 3. The source: the rendezvous.
	sf, err := sc.open(ctx, ssp+"?tpc.key="+key+"&tpc.dst="+dstHost+"&tpc.stage=copy", 0, xrdfs.OpenOptionsOpenRead)
	if err != nil {
		return tpcError(what, "open the source", src.addr, err)
	}
	defer closeFile(ctx, sc, sf)

	// 4. The copy. Its request goes on in the background, on a context
	// go-hep never sees cancelled (see conn.go); the destination is
	// stat'ed meanwhile.
	done := make(chan error, 1)
	go func() { done <- df.Sync(context.Background()) }()
	tick := time.NewTicker(tpcPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return tpcError(what, "copy", b.addr, err)
			}
			dfOpen = false
			if err := closeFile(ctx, dc, df); err != nil {
				return classify("third-party copy: close", dname, err)
			}
			es, err := dc.stat(ctx, dsp)
			if err != nil {
				return classify("third-party copy: stat", dname, err)
			}
			if progress != nil {
				progress(es.EntrySize)
			}
			if es.EntrySize != ses.EntrySize {
				return fmt.Errorf("root: %s: %w: the copy has %d bytes, the source had %d when it began",
					what, backend.ErrChanged, es.EntrySize, ses.EntrySize)
			}
			return nil
		case <-ctx.Done():
			// The deferred close cancels the copy on the server.
			return fmt.Errorf("root: %s: %w", what, ctx.Err())
		case <-dc.failed:
			return fmt.Errorf("root: %s: %w", what, dc.lostErr())
		case <-tick.C:
			// A failed stat says nothing of the copy (the next
			// round of the loop sees a cancelled ctx or a dead
			// conn); the copy's own answer will say how it went.
			if es, err := dc.stat(ctx, dsp); err == nil && progress != nil {
				progress(es.EntrySize)
			}
		}
	}
}

// tpcAllowed asks the server whether it allows third-party copies, as
// xrdcp does before one: kXR_query kXR_Qconfig "tpc". XRootD answers "1"
// ("+1" if it wants them encrypted) when it does, and the name asked for
// when it has no such setting; a server that does not know the query
// (go-hep's) does not allow them either.
func (c *conn) tpcAllowed(ctx context.Context) (bool, error) {
	req := &query.Request{Query: query.Config, Args: []byte("tpc")}
	data, err := await(ctx, c, func(ctx context.Context) ([]byte, error) {
		var resp query.Response
		_, err := c.cli.Send(ctx, &resp, req)
		return resp.Data, err
	}, nil)
	if err != nil {
		if k := code(err); k == kUnsupported || k == kInvalidRequest || k == kArgInvalid {
			return false, nil
		}
		return false, err
	}
	v := strings.TrimSpace(strings.TrimRight(string(data), "\x00"))
	return v == "1" || v == "+1", nil
}

// tpcKey returns a new rendezvous key: 24 hex digits as XrdCl makes them,
// but random, so that nobody can guess it.
func tpcKey() (string, error) {
	var k [12]byte
	if _, err := rand.Read(k[:]); err != nil {
		return "", fmt.Errorf("rendezvous key: %w", err)
	}
	return hex.EncodeToString(k[:]), nil
}

// tpcError classifies a failed step of a third-party copy; a server
// without TPC configured is named, with what it lacks.
func tpcError(what, step, addr string, err error) error {
	if strings.Contains(strings.ToLower(err.Error()), errNoTPC) {
		return fmt.Errorf("root: %s: %w: the server at %s does not allow third-party copies (its configuration needs ofs.tpc): %w",
			what, backend.ErrInvalid, addr, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("root: %s: %s: %w", what, step, err)
	}
	return classify(what+":", step, err)
}
