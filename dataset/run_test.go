package dataset

import (
	"context"
	"errors"
	"math"
	"testing"
)

// A performer error stops Run with the step pending; running the same
// planner again retries it, and every file is still moved exactly once.
func TestRunRetriesAfterError(t *testing.T) {
	files := same("f", 5000, mib)
	pl, err := NewOptimalCC(files, params(16))
	if err != nil {
		t.Fatal(err)
	}
	ok := newFake(func(pp, p, cc int) float64 { return 1e7 * peak(cc, 8) })
	calls := 0
	boom := errors.New("link down")
	flaky := PerformerFunc(func(ctx context.Context, fs []File, pp, p, cc int) (float64, error) {
		calls++
		if calls == 3 {
			return 0, boom
		}
		return ok.Perform(ctx, fs, pp, p, cc)
	})
	rep, err := Run(context.Background(), pl, flaky)
	if !errors.Is(err, boom) || len(rep.Steps) != 2 {
		t.Fatalf("first run: %d steps, %v", len(rep.Steps), err)
	}
	rest, err := Run(context.Background(), pl, flaky)
	if err != nil {
		t.Fatal(err)
	}
	if got := rest.Steps[0]; got.Phase != PhaseSampleCC || got.CC != 4 {
		t.Errorf("retry began with %+v, want the cc 4 sample", got)
	}
	if last := rest.Steps[len(rest.Steps)-1]; last.CC != 8 {
		t.Errorf("bulk %+v, want cc 8", last)
	}
	ok.exactlyOnce(t, files)
}

func TestRunCanceled(t *testing.T) {
	pl, _ := NewOptimalCC(same("f", 100, mib), params(16))
	ctx, cancel := context.WithCancel(context.Background())
	perf := PerformerFunc(func(ctx context.Context, fs []File, pp, p, cc int) (float64, error) {
		cancel()
		return 1, nil
	})
	rep, err := Run(ctx, pl, perf)
	if !errors.Is(err, context.Canceled) || len(rep.Steps) != 1 {
		t.Errorf("%d steps, %v", len(rep.Steps), err)
	}
}

func TestReportThroughput(t *testing.T) {
	r := Report{Steps: []StepReport{
		{Bytes: 100, Throughput: 10},         // 10 s
		{Bytes: 300, Throughput: 100},        // 3 s
		{Bytes: 0, Throughput: 0},            // nothing
		{Bytes: 50, Throughput: math.Inf(1)}, // unmeasurable: bytes count, time does not
		{Bytes: 50, Throughput: 0, Files: 7}, // unmeasured
		{Bytes: 0, Throughput: 5, Files: 3},  // empty files
	}}
	if r.Bytes() != 500 || r.Files() != 10 || r.Seconds() != 13 {
		t.Errorf("bytes %d files %d seconds %v", r.Bytes(), r.Files(), r.Seconds())
	}
	if got := r.Throughput(); math.Abs(got-500.0/13) > 1e-9 {
		t.Errorf("throughput %v", got)
	}
	if (Report{}).Throughput() != 0 {
		t.Errorf("empty report has a throughput")
	}
}
