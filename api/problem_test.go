package api

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-dtn/sluice/server"
)

// TestProblemStatuses: the server's errors become the statuses clients act
// on; a database that cannot take the request now (its disk full, down) is
// 503, to try again, not 500.
func TestProblemStatuses(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("x: %w", server.ErrInvalid), http.StatusUnprocessableEntity},
		{fmt.Errorf("x: %w", server.ErrForbidden), http.StatusForbidden},
		{fmt.Errorf("server: storing job: %w", &pgconn.PgError{Code: "53100"}), http.StatusServiceUnavailable},
		{fmt.Errorf("server: store: token: %w", &pgconn.ConnectError{}), http.StatusServiceUnavailable},
		{errors.New("a bug"), http.StatusInternalServerError},
	} {
		var se huma.StatusError
		if !errors.As(problem(c.err), &se) || se.GetStatus() != c.want {
			t.Errorf("%v: %v, want %d", c.err, problem(c.err), c.want)
		}
	}
}
