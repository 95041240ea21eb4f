package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
