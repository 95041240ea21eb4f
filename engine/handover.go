package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-dtn/sluice/backend"
)

// Handover preempts old in favour of next as SC'15 §4.5 does: old keeps
// moving bytes until next has written its first bytes (or has finished),
// and only then is paused, so the link does not idle while next connects
// and starts up. The caller starts next before calling Handover.
//
// If next fails before moving bytes, or ctx ends, old is left running and
// the error is returned. If old has already finished, that is not an
// error: it no longer needs preempting.
func Handover(ctx context.Context, old, next *Transfer) error {
	if old == nil || next == nil {
		return fmt.Errorf("engine: handover: %w: nil transfer", backend.ErrInvalid)
	}
	select {
	case <-next.Moving():
	case <-next.Done():
		if _, err := next.Wait(); err != nil {
			return fmt.Errorf("engine: handover: replacement failed, the old transfer keeps running: %w", err)
		}
	case <-ctx.Done():
		return fmt.Errorf("engine: handover: %w", ctx.Err())
	}
	if err := old.Pause(ctx); err != nil && !errors.Is(err, ErrFinished) {
		return fmt.Errorf("engine: handover: %w", err)
	}
	return nil
}
