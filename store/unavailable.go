package store

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// Unavailable reports whether err is the database refusing work for now,
// not the request's fault nor a bug: its disk full, the database down or
// restarting, out of connections, or locked past the wait. Nothing of a
// refused write was stored, and the same request may succeed later: the
// API answers 503 rather than 500.
func Unavailable(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary result code
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED: still held past the wait
			return true
		case 10, 13: // SQLITE_IOERR, SQLITE_FULL: the disk
			return true
		}
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Classes 08 (connection exception), 53 (insufficient
		// resources: disk full, out of memory or connections) and 57P
		// (the server shutting down or starting).
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "53") || strings.HasPrefix(pe.Code, "57P")
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
}
