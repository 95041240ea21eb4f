package file

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/backendtest"
)

// wholeOnly is the file backend made to write only whole files, as an
// HTTP or S3 server does: what the conformance suite asks of a
// backend.WholeWriter, checked on a backend known to be right otherwise.
type wholeOnly struct{ backend.Backend }

func (wholeOnly) WritesWhole() {}

func (w wholeOnly) WriteAt(ctx context.Context, p string, off int64, r io.Reader, n int64) error {
	if off != 0 {
		return fmt.Errorf("%w: write at %d: whole files only", backend.ErrInvalid, off)
	}
	if n < 0 {
		return w.Backend.WriteAt(ctx, p, off, r, n) // refused, nothing changed
	}
	// A whole write replaces the file: truncate, then write.
	if err := w.Backend.Truncate(ctx, p, 0); err != nil && n > 0 {
		return err
	}
	return w.Backend.WriteAt(ctx, p, 0, r, n)
}

func (w wholeOnly) Truncate(ctx context.Context, p string, size int64) error {
	if size != 0 {
		return fmt.Errorf("%w: truncate to %d: whole files only", backend.ErrInvalid, size)
	}
	return w.Backend.Truncate(ctx, p, 0)
}

// TestConformanceWholeWriter runs the suite's whole-file variant.
func TestConformanceWholeWriter(t *testing.T) {
	backendtest.Run(t, backendtest.Fixture{
		New: func(t *testing.T) backendtest.Env {
			b, dir := newTest(t)
			return backendtest.Env{B: wholeOnly{b}, Dir: "/", Local: dir}
		},
		Lacks: backendtest.Lacks{
			RangeChecksummer: "a wrapper", ExistingWriter: "whole files only", NoReplaceRenamer: "a wrapper",
			ModTimeSetter: "a wrapper", Permissions: "the file backend's own run checks them",
		},
	})
}
