package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/wire"
)

// TestEstimateOutlastsTimeout: an estimate that samples for longer than
// the client's per-request timeout (60 s by default; a slow path takes
// minutes) still gets its answer. Before, the client gave up, and the
// server, seeing its caller go, stopped sampling: no such estimate could
// ever finish.
func TestEstimateOutlastsTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // sampling
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(wire.EstimateOut{Source: "a", Destination: "b", Streams: 4})
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok", &http.Client{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Estimate(context.Background(), wire.EstimateIn{Source: "sluice://a/f", Destination: "sluice://b/f", Size: 1})
	if err != nil || out.Streams != 4 {
		t.Errorf("estimate that takes longer than the client's timeout: %+v, %v; want its answer", out, err)
	}
	// The caller's context still bounds it.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Estimate(ctx, wire.EstimateIn{Source: "sluice://a/f", Destination: "sluice://b/f", Size: 1}); err == nil {
		t.Error("estimate past its caller's deadline succeeded")
	}
}

// TestEventsFrom: open runs once the stream is live (at the server's
// first keepalive) and before any other event reaches f; open returning
// false ends the stream without reading further, and keepalives never
// reach f.
func TestEventsFrom(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range []wire.Event{{Type: "keepalive"}, {Type: "task", Job: 7, Task: 1, State: "done"}, {Type: "keepalive"}, {Type: "job", Job: 7, State: "done"}} {
			b, _ := json.Marshal(e)
			w.Write([]byte("data: " + string(b) + "\n\n"))
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		open bool // what open answers
		want []string
	}{
		{"open, then the events", true, []string{"open", "task", "job"}},
		{"open says stop", false, []string{"open"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := c.EventsFrom(context.Background(), 7, func() bool {
				got = append(got, "open")
				return tc.open
			}, func(e wire.Event) bool {
				got = append(got, e.Type)
				return e.Type != "job"
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("saw %v, want %v", got, tc.want)
			}
		})
	}
}
