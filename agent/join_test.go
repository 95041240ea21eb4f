package agent

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-dtn/sluice/wire"
)

// TestParseServers: every --server URL is checked at start. Before, only
// those join tried were: with the first server up, a bad URL later in
// the list was found by heartbeats failing over to it, which then ended
// for good, leaving the agent running but never heartbeating.
func TestParseServers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // nil: an error
	}{
		{"http://s1:8080", []string{"http://s1:8080"}},
		{"http://s1:8080, https://s2:8443,", []string{"http://s1:8080", "https://s2:8443"}},
		{"http://s1:8080,s2:8080", nil},
		{"http://s1:8080,ftp://s2", nil},
		{"http://s1:8080,http://", nil},
		{" , ", nil},
	} {
		got, err := ParseServers(tc.in)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q: %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestBeat: a heartbeat goes to the server in use, moves on to the next
// when one cannot be reached or fails (5xx), stays with one that refuses
// it (4xx: another would say the same), and is not sent at all while the
// agent cannot serve.
func TestBeat(t *testing.T) {
	var hits, status [3]atomic.Int32 // status: each server's answer
	setStatus := func(codes ...int32) {
		for i, c := range codes {
			status[i].Store(c)
		}
	}
	setStatus(http.StatusServiceUnavailable, http.StatusNoContent, http.StatusNoContent)
	var urls []string
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/agents/heartbeat" {
				t.Errorf("server %d: %s %s, want a heartbeat", i, r.Method, r.URL.Path)
			}
			hits[i].Add(1)
			w.WriteHeader(int(status[i].Load()))
		}))
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens there now
	ctx := context.Background()
	hc := &http.Client{Timeout: 5 * time.Second}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	count := func() [3]int32 { return [3]int32{hits[0].Load(), hits[1].Load(), hits[2].Load()} }

	j := &Joiner{Servers: []string{dead.URL, urls[0], urls[1], urls[2]}, Token: "t", Log: quiet}
	if err := j.Beat(ctx, hc); err != nil {
		t.Fatalf("beat: %v", err)
	}
	if got := count(); got != [3]int32{1, 1, 0} || j.Server() != urls[1] {
		t.Fatalf("beats %v, now at %s; want past the dead one and the failing one to %s", got, j.Server(), urls[1])
	}
	if err := j.Beat(ctx, hc); err != nil || count() != [3]int32{1, 2, 0} {
		t.Fatalf("second beat: %v, beats %v; want it at the same server", err, count())
	}
	// A refusal stays: the next server would refuse too.
	status[1].Store(http.StatusUnauthorized)
	if err := j.Beat(ctx, hc); err == nil || count() != [3]int32{1, 3, 0} || j.Server() != urls[1] {
		t.Fatalf("refused beat: %v, beats %v, at %s; want the refusal, and no move", err, count(), j.Server())
	}
	// Every server failing: one pass, and the error.
	setStatus(503, 503, 503)
	if err := j.Beat(ctx, hc); err == nil || count() != [3]int32{2, 4, 1} {
		t.Fatalf("all failing: %v, beats %v; want an error after one pass", err, count())
	}
	// An agent that cannot serve sends nothing.
	j.SetHealth(func() error { return errors.New("root gone") })
	if err := j.Beat(ctx, hc); !errors.Is(err, ErrUnhealthy) || count() != [3]int32{2, 4, 1} {
		t.Fatalf("unhealthy: %v, beats %v; want ErrUnhealthy and no beat", err, count())
	}
}

// handlerTransport answers each request with a handler in memory: in a
// synctest bubble, a goroutine waiting on a socket is not durably
// blocked, so an idle keep-alive connection would hold the clock still.
type handlerTransport struct{ h http.Handler }

func (ht handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	ht.h.ServeHTTP(rec, r)
	if r.Body != nil {
		r.Body.Close()
	}
	return rec.Result(), nil
}

// TestJoinAndHeartbeatTimes: on the bubble's clock, a registration that
// finds no server answering is retried after 0.5, 1, 2 s (doubling, at
// most 10 s), and heartbeats go out once a period, the first one period
// after they start, until the context ends.
func TestJoinAndHeartbeatTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var registers, beats []time.Duration
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			at := time.Since(start)
			switch r.URL.Path {
			case "/v1/agents/register":
				registers = append(registers, at)
				if len(registers) <= 4 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(wire.JoinedOut{Key: make([]byte, 32), HeartbeatSeconds: 2})
			case "/v1/agents/heartbeat":
				beats = append(beats, at)
				w.WriteHeader(http.StatusNoContent)
			default:
				t.Errorf("%s %s", r.Method, r.URL.Path)
			}
		})
		j := &Joiner{Servers: []string{"http://s1:8080"}, Token: "t", Log: slog.New(slog.DiscardHandler), Transport: handlerTransport{h}}
		if _, err := j.Join(context.Background()); err != nil {
			t.Fatal(err)
		}
		s := time.Second
		if want := []time.Duration{0, s / 2, 3 * s / 2, 7 * s / 2, 15 * s / 2}; !slices.Equal(registers, want) {
			t.Errorf("registrations at %v, want %v", registers, want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 9*s)
		defer cancel()
		j.Heartbeats(ctx, 2*s)
		if want := []time.Duration{19 * s / 2, 23 * s / 2, 27 * s / 2, 31 * s / 2}; !slices.Equal(beats, want) {
			t.Errorf("heartbeats at %v, want %v", beats, want)
		}
	})
}

// TestJoinUntrustedServer: a server whose certificate the agent does not
// trust is skipped for the next one, and when every server's is
// untrusted the join fails at once (it would fail for good) with the
// verification error, the join token sent to none of them.
func TestJoinUntrustedServer(t *testing.T) {
	var registered atomic.Int32
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a server whose certificate is untrusted got %s %s", r.Method, r.URL.Path)
	}))
	defer untrusted.Close()
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		registered.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"key":"` + strings.Repeat("k", 44) + `","heartbeat_seconds":1}`))
	}))
	defer good.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	info := wire.AgentIn{Name: "a1", URL: "http://127.0.0.1:1"}

	j := &Joiner{Servers: []string{untrusted.URL}, Token: "t", Info: info, Log: quiet}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ua x509.UnknownAuthorityError
	if _, err := j.Join(ctx); !errors.As(err, &ua) {
		t.Fatalf("join of an untrusted server only: %v, want the unknown authority at once", err)
	}
	j = &Joiner{Servers: []string{untrusted.URL, good.URL}, Token: "t", Info: info, Log: quiet}
	if _, err := j.Join(ctx); err != nil || registered.Load() != 1 || j.Server() != good.URL {
		t.Fatalf("join past an untrusted server: %v, registered %d, at %s", err, registered.Load(), j.Server())
	}
}
