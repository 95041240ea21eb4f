// Package agent owns the server side of the sluice agent protocol
// (docs/agent-protocol.md): an HTTP server that serves one directory tree
// through backend/file to holders of tokens signed with the agent's key.
// It decides who may do what (auth tokens, scope and prefix), refuses
// paths that leave the root before the file system sees them, maps backend
// errors to statuses, and performs third-party pulls from other agents.
// It also joins the agent to its servers and keeps it alive there
// (Joiner), through package client.
// Storage semantics (what a write or a rename does) belong to backend/file,
// the wire client to backend/sluice.
package agent

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/emul"
)

// Version is the protocol version the agent speaks, reported by /v1/info.
const Version = "v1"

// maxJSONBody bounds the JSON request bodies (rename, batch, pull): they
// are small, and an unbounded decode is a way to exhaust memory.
const maxJSONBody = 1 << 20

// shutdownGrace is how long Serve lets requests in flight finish once its
// context ends, before it closes their connections.
const shutdownGrace = 10 * time.Second

// Config configures a Server.
type Config struct {
	Name   string       // the agent's name: tokens must have it (or *) as audience
	Root   string       // the directory served
	Key    []byte       // the token key (auth.LoadKey)
	Logger *slog.Logger // nil: discard
	Client *http.Client // for pulls from other agents; nil: a plain client
	// PullFrom, if not empty, is what pulls may fetch from: host:port
	// as a source URL names it, IP addresses and CIDR prefixes (matched
	// against the address connected to, after name resolution). Other
	// sources are refused with 403. Empty: any the server names, except
	// link-local and multicast addresses (a cloud's metadata
	// service is link-local; no DTN is), checked on the address dialled
	// when Client's Transport is an *http.Transport (or Client is nil).
	PullFrom []string
	// Emulation, a test facility, limits the agent's data path to behave
	// like a WAN DTN (package emul): GET and batch data sent, PUT bodies
	// and pulled data received, one stream per request, a round-trip time
	// before every request is answered, and start-up latency on
	// connections Serve accepts; External steps count from New.
	// nil (always, in production) leaves the data path alone, sendfile
	// included.
	Emulation *emul.Config
	// Storage opens the storage servers (GridFTP, XRootD) the service
	// has this agent read from or write to (POST /v1/copy, with a token
	// naming the server in its Remotes): backend/all.Storage. nil: the
	// agent reaches none.
	Storage *backend.Registry
}

// Server is one agent.
type Server struct {
	name    string
	fs      *file.Backend
	key     []byte
	log     *slog.Logger
	client  *http.Client
	pulls   *pullFrom         // nil: pulls from anywhere
	storage *backend.Registry // nil: no copies with storage servers
	opened  storageCache      // the storage servers opened, kept a while
	now     func() time.Time  // the clock tokens are checked against
	shape   *emul.Shaper      // nil unless emulating
	// bufs holds the copy buffers of checksummed batch responses: a
	// MultiWriter offers no ReadFrom, so io.Copy would move a file 32
	// KiB per system call.
	bufs sync.Pool
	// fences holds per-file fence locks (see fence.go).
	fences *fences

	// instance tells this agent apart from every other, also from one
	// of the same name: it is random, made at start, and /v1/info
	// reports it, so a client that reaches the agent through two host
	// names (localhost and 127.0.0.1) can tell that it is one agent.
	instance string
}

// New checks cfg and opens the root.
func New(cfg Config) (*Server, error) {
	if cfg.Name == "" {
		return nil, errors.New("agent: no name (tokens name the agent they are for)")
	}
	if len(cfg.Key) < auth.MinKeySize {
		return nil, fmt.Errorf("agent: token key has %d bytes, need at least %d", len(cfg.Key), auth.MinKeySize)
	}
	if cfg.Root == "" {
		return nil, errors.New("agent: no root directory")
	}
	fi, err := os.Stat(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("agent: root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("agent: root %s is not a directory", cfg.Root)
	}
	pulls, err := parsePullFrom(cfg.PullFrom)
	if err != nil {
		return nil, err
	}
	fs, err := file.New(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	s := &Server{
		name:    cfg.Name,
		fs:      fs,
		key:     append([]byte(nil), cfg.Key...),
		log:     cfg.Logger,
		client:  cfg.Client,
		pulls:   pulls,
		now:     time.Now,
		fences:  newFences(),
		storage: cfg.Storage,
	}
	var inst [16]byte
	rand.Read(inst[:]) // never fails (crypto/rand)
	s.instance = hex.EncodeToString(inst[:])
	s.bufs.New = func() any { b := make([]byte, 256<<10); return &b }
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.client == nil {
		// The agent's own requests (pulls from other agents) are small;
		// the bodies they read go straight into 1 MiB copy buffers,
		// which bufio passes through. Megabyte connection buffers,
		// right for a client that uploads, cost 2 MiB per pooled
		// connection here (a destination pulling many batches at once
		// peaked at 190-260 MiB with them).
		t := sluice.NewTransport()
		t.ReadBufferSize, t.WriteBufferSize = 64<<10, 64<<10
		s.client = &http.Client{Transport: t}
	}
	switch c, err := pulls.restrict(s.client); {
	case err == nil:
		s.client = c
	case pulls != nil:
		fs.Close()
		return nil, err
	}
	// Without PullFrom, a Client whose Transport is not an
	// *http.Transport keeps its own dialling (see Config.PullFrom).
	if cfg.Emulation != nil {
		if s.shape, err = emul.New(*cfg.Emulation); err != nil {
			fs.Close()
			return nil, fmt.Errorf("agent: %w", err)
		}
		e := cfg.Emulation
		s.log.Warn("emulating a WAN DTN: the data path is throttled (a test facility)",
			"capacity_bps", e.CapacityBps, "conn_bps", e.ConnBps, "knee", e.Knee, "decline", e.Decline,
			"external_steps", len(e.External), "startup_ms", e.StartupMs, "rtt_ms", e.RTTMs)
	}
	return s, nil
}

// Shaper is the agent's link emulation (nil unless Config.Emulation was
// set): evaluations rewind its outside traffic between runs.
func (s *Server) Shaper() *emul.Shaper { return s.shape }

// Close releases the root. Requests still being served fail.
func (s *Server) Close() error {
	s.opened.closeAll()
	return s.fs.Close()
}

// Check reports whether the agent can serve its root (see
// file.Backend.Check); an agent that cannot stops heartbeating, so that
// the service marks it down instead of failing every transfer on it.
func (s *Server) Check() error { return s.fs.Check() }

// Serve serves the agent's handler on ln (with TLS if tlsCert and tlsKey
// name PEM files) until ctx ends, then shuts down: it stops accepting,
// lets requests in flight finish for a grace period, then closes them. It
// returns nil after a shutdown caused by ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener, tlsCert, tlsKey string) error {
	if (tlsCert == "") != (tlsKey == "") {
		return errors.New("agent: TLS needs both a certificate and a key")
	}
	srv := &http.Server{
		Handler: s.Handler(),
		// Bodies can take hours (a large PUT); only the header is timed.
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// Request contexts do not derive from ctx: when it ends, requests
		// in flight get the grace period rather than an instant cancel.
	}
	if tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(tlsCert, tlsKey)
		if err != nil {
			return fmt.Errorf("agent: TLS: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	// Start-up latency goes under TLS, so the handshake pays it as a
	// real connection's would. A nil shape returns ln.
	ln = s.shape.Listener(ln)
	if srv.TLSConfig != nil {
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
			done <- nil
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		err := srv.Shutdown(sctx)
		if err != nil {
			srv.Close()
		}
		done <- err
	}()
	err := srv.Serve(ln)
	close(stop)
	if !errors.Is(err, http.ErrServerClosed) {
		<-done
		return fmt.Errorf("agent: %w", err)
	}
	if err := <-done; err != nil {
		s.log.Warn("shutdown grace period over; closed connections in flight", "err", err)
	}
	return nil
}
