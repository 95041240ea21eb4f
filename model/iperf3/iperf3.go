// Package iperf3 owns sampling a network path with iperf3 for the
// throughput models of package model: the Iperf mode of the estimation
// service of Yin, Yildirim et al., "A Data Throughput Prediction and
// Optimization Service for Widely Distributed Many-Task Computing". Estimate
// runs iperf3 clients against a reachable
// iperf3 server with 1, 4, 16, ... parallel streams as model.Sampler
// (Algorithm 2) asks, reads iperf3's JSON reports, fits the
// parallel-stream curve with model.Predict, and answers with the optimal
// streams, the predicted throughput, the time a transfer of a given size
// would take, the samples and what sampling cost.
//
// iperf3 measures memory-to-memory TCP throughput from this host to the
// server; unlike the service's sample transfers (server/estimate.go) it
// involves no files, disks, agents or transfer engine, so it is the
// network's curve, not a transfer's.
//
// The iperf3 invocation is a Runner, so everything but the process itself
// is tested with recorded iperf3 output (testdata/).
package iperf3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-dtn/sluice/model"
)

const (
	// DefaultPort is iperf3's default server port.
	DefaultPort = 5201
	// DefaultSeconds is the length of one test (-t) when Options gives
	// none: long enough for a few RTTs of steady state on a WAN, short
	// enough that six levels cost well under a minute.
	DefaultSeconds = 2
	// MaxSeconds bounds one test: sampling is meant to be cheap.
	MaxSeconds = 600
	// MaxStreams is the most parallel streams iperf3 accepts (-P).
	MaxStreams = 128
	// DefaultRetries is how often a test is retried while the server is
	// busy with another client (an iperf3 server runs one test at a time).
	DefaultRetries = 3
	// DefaultBackoff is the wait before the first retry; it doubles after
	// each (0.5 + 1 + 2 s with the defaults).
	DefaultBackoff = 500 * time.Millisecond
)

// runSlack is how long a test may run beyond its -t and -O seconds
// (connecting, creating the streams, exchanging the results) before it is
// stopped as hung. A variable for tests.
var runSlack = 30 * time.Second

// ErrBusy is returned (wrapped) when the server stayed busy with another
// client's test through all retries.
var ErrBusy = errors.New("iperf3 server is busy")

// Runner runs iperf3 with args and returns what it wrote to standard
// output (the -J report) and its error, if it failed. It must stop when
// ctx ends. Exec is the real one; tests replay recorded reports.
type Runner func(ctx context.Context, args []string) ([]byte, error)

// Options says what to sample. Host is required; the zero value of every
// other field means its default.
type Options struct {
	// Host and Port are the iperf3 server's (Port 0: DefaultPort).
	// ParseServer reads them from HOST[:PORT].
	Host string
	Port int
	// Seconds is the length of each test, iperf3's -t (0:
	// DefaultSeconds). Whole seconds only: iperf3 (3.12, Debian 12)
	// reads -t 0.5 as 0, and -t 0 means no time limit.
	Seconds int
	// Omit is iperf3's -O: seconds at the start of each test that are run
	// but not measured, so that TCP slow start does not count against
	// the lower stream counts (0: none, as the paper's plain Iperf runs).
	// They are part of the cost.
	Omit int
	// MaxStreams is the largest stream count sampled and chosen (0:
	// model.DefaultMaxLevel; at most MaxStreams).
	MaxStreams int
	// Threshold is model.Sampler's relative slope threshold (0: its
	// default).
	Threshold float64
	// Growth is model.Sampler's factor from one stream count to the next
	// (0: model.DefaultGrowth; 2 is the paper's doubling).
	Growth int
	// Size is the transfer whose time Result.Seconds predicts, in bytes
	// (0: no prediction).
	Size int64
	// Retries is how often a test is retried while the server is busy
	// (0: DefaultRetries; negative: never), waiting Backoff (0:
	// DefaultBackoff), then twice as long, and so on.
	Retries int
	Backoff time.Duration
	// Run runs iperf3 (nil: Exec("iperf3")).
	Run Runner
}

// Sample is one iperf3 test.
type Sample struct {
	Streams int `json:"streams"`
	// Throughput is what the server received, in bytes/s (iperf3's
	// end.sum_received.bits_per_second / 8).
	Throughput float64 `json:"throughput"`
	// Seconds is the measured period (end.sum_received.seconds): the
	// test's -t, without the omitted start.
	Seconds float64 `json:"seconds"`
	// BytesSent is what the client sent, the omitted start included.
	BytesSent int64 `json:"bytes_sent"`
	// Retransmits is the sender's TCP retransmissions in the measured
	// period.
	Retransmits int64 `json:"retransmits"`
	// Attempts is 1 plus the retries the test needed (server busy).
	Attempts int `json:"attempts"`
}

// Result is Estimate's answer. The fields it shares with the estimation
// service's answer (api.EstimateOut) have the same JSON names and units.
type Result struct {
	Server     string  `json:"server"`     // host:port of the iperf3 server
	Streams    int     `json:"streams"`    // optimal parallel streams
	Throughput float64 `json:"throughput"` // predicted bytes/s at Streams
	// Fitted, Uncertainty, Clamped and Note are model.Bounded's: the
	// curve's value at Streams, its relative uncertainty, and whether
	// (and why) Throughput was held below the curve to what the samples
	// support.
	Fitted      float64  `json:"throughput_fitted"`
	Uncertainty float64  `json:"uncertainty"`
	Clamped     bool     `json:"clamped"`
	Note        string   `json:"note,omitempty"`
	Seconds     float64  `json:"seconds"` // predicted time for Size bytes (0 without Size)
	Size        int64    `json:"size"`
	Samples     []Sample `json:"samples"`
	// Model says how Streams was chosen (the fitted model, or why it fell
	// back to the best sample) and why sampling stopped.
	Model string `json:"model"`
	// Cost is what sampling took: wall-clock seconds (retries and
	// back-off included) and the bytes iperf3 sent.
	Cost      float64 `json:"cost_seconds"`
	CostBytes int64   `json:"cost_bytes"`
	// TestSeconds and OmitSeconds are the -t and -O of every test.
	TestSeconds int       `json:"test_seconds"`
	OmitSeconds int       `json:"omit_seconds"`
	Version     string    `json:"iperf3_version"`
	At          time.Time `json:"measured_at"`
	// Prediction is the fitted curve, for callers that want it at other
	// stream counts.
	Prediction model.Prediction `json:"-"`
}

// ParseServer reads HOST, HOST:PORT, [IPv6] or [IPv6]:PORT (a bare IPv6
// address is a host without port). Port 0 means none was given.
func ParseServer(s string) (host string, port int, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", 0, errors.New("no iperf3 server: want HOST or HOST:PORT")
	}
	host = s
	switch {
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		host = s[1 : len(s)-1]
	case strings.Count(s, ":") == 1 || strings.HasPrefix(s, "["):
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return "", 0, fmt.Errorf("iperf3 server %q: want HOST or HOST:PORT: %w", s, err)
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("iperf3 server %q: port %q is not a number in 1-65535", s, p)
		}
		host, port = h, n
	}
	if err := checkHost(host); err != nil {
		return "", 0, fmt.Errorf("iperf3 server %q: %w", s, err)
	}
	return host, port, nil
}

func checkHost(h string) error {
	switch {
	case h == "":
		return errors.New("no host")
	case strings.HasPrefix(h, "-"):
		return fmt.Errorf("host %q starts with '-'", h) // it would read as an iperf3 option
	case strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return fmt.Errorf("host %q contains spaces or control characters", h)
	}
	return nil
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if err := checkHost(o.Host); err != nil {
		return o, fmt.Errorf("iperf3 server: %w", err)
	}
	switch {
	case o.Port == 0:
		o.Port = DefaultPort
	case o.Port < 0 || o.Port > 65535:
		return o, fmt.Errorf("iperf3 port %d is outside 1-65535", o.Port)
	}
	switch {
	case o.Seconds == 0:
		o.Seconds = DefaultSeconds
	case o.Seconds < 0 || o.Seconds > MaxSeconds:
		return o, fmt.Errorf("iperf3 test length %d s is outside 1-%d s", o.Seconds, MaxSeconds)
	}
	if o.Omit < 0 || o.Omit > MaxSeconds {
		return o, fmt.Errorf("iperf3 omitted start %d s is outside 0-%d s", o.Omit, MaxSeconds)
	}
	switch {
	case o.MaxStreams == 0:
		o.MaxStreams = model.DefaultMaxLevel
	case o.MaxStreams < 0 || o.MaxStreams > MaxStreams:
		return o, fmt.Errorf("max streams %d is outside 1-%d (iperf3's -P limit)", o.MaxStreams, MaxStreams)
	}
	if o.Threshold < 0 || math.IsNaN(o.Threshold) || math.IsInf(o.Threshold, 0) {
		return o, fmt.Errorf("slope threshold %g is not a non-negative number", o.Threshold)
	}
	if o.Growth < 0 || o.Growth == 1 {
		return o, fmt.Errorf("growth %d is not a factor of at least 2 (0: the default)", o.Growth)
	}
	if o.Size < 0 {
		return o, fmt.Errorf("size %d is negative", o.Size)
	}
	switch {
	case o.Retries == 0:
		o.Retries = DefaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	switch {
	case o.Backoff == 0:
		o.Backoff = DefaultBackoff
	case o.Backoff < 0:
		return o, fmt.Errorf("back-off %v is negative", o.Backoff)
	}
	if o.Run == nil {
		o.Run = Exec("iperf3")
	}
	return o, nil
}

func (o Options) server() string { return net.JoinHostPort(o.Host, strconv.Itoa(o.Port)) }

// args is the iperf3 command line of a test with n streams.
func (o Options) args(n int) []string {
	a := []string{"-c", o.Host, "-p", strconv.Itoa(o.Port), "-P", strconv.Itoa(n), "-t", strconv.Itoa(o.Seconds), "-J"}
	if o.Omit > 0 {
		a = append(a, "-O", strconv.Itoa(o.Omit))
	}
	return a
}

// Estimate samples the path to the iperf3 server with 1, 4, 16, ... streams
// (Options.Growth) until model.Sampler stops (the gain per added stream
// falls below its threshold, throughput falls, or the next level would
// pass MaxStreams),
// and fits the parallel-stream model to the samples. A test that fails
// fails the whole estimate: a curve with a hole is no basis for an answer.
func Estimate(ctx context.Context, o Options) (Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Result{}, fmt.Errorf("iperf3 sampling: %w", err)
	}
	e := Result{Server: o.server(), Size: o.Size, TestSeconds: o.Seconds, OmitSeconds: o.Omit, At: time.Now()}
	sp := &model.Sampler{Threshold: o.Threshold, Growth: o.Growth, Max: o.MaxStreams}
	start := time.Now()
	for {
		n, ok := sp.Next()
		if !ok {
			break
		}
		s, version, err := o.test(ctx, n, len(e.Samples) > 0)
		if err != nil {
			return Result{}, fmt.Errorf("iperf3 sampling %s with %d streams: %w", e.Server, n, err)
		}
		e.Samples = append(e.Samples, s)
		e.CostBytes += s.BytesSent
		e.Version = version
		if err := sp.Add(n, s.Throughput); err != nil {
			return Result{}, fmt.Errorf("iperf3 sampling %s: %w", e.Server, err)
		}
	}
	e.Cost = time.Since(start).Seconds()
	ns, ths := sp.Samples()
	pred, err := model.Predict(ns, ths, model.PredictOptions{Lo: 1, Hi: o.MaxStreams})
	if err != nil {
		return Result{}, fmt.Errorf("iperf3 estimate for %s: %w", e.Server, err)
	}
	e.Prediction = pred
	e.Streams = pred.Optimum()
	// A fit of three samples can peak far above all of them: the answer
	// is held to what they support.
	b := pred.Bound(e.Streams)
	e.Throughput, e.Fitted, e.Uncertainty, e.Clamped, e.Note = b.Throughput, b.Fitted, b.Uncertainty, b.Clamped, b.Note
	e.Model = pred.Reason + "; sampling stopped: " + sp.Stopped()
	if o.Size > 0 && e.Throughput > 0 {
		e.Seconds = float64(o.Size) / e.Throughput
	}
	return e, nil
}

// test runs one iperf3 test with n streams, retrying while the server is
// busy, and returns the sample and the iperf3 version.
func (o Options) test(ctx context.Context, n int, reached bool) (Sample, string, error) {
	args := o.args(n)
	limit := time.Duration(o.Seconds+o.Omit)*time.Second + runSlack
	wait := o.Backoff
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, limit)
		out, runErr := o.Run(rctx, args)
		hung := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err := ctx.Err(); err != nil {
			return Sample{}, "", err
		}
		if hung {
			return Sample{}, "", fmt.Errorf("iperf3 %s did not finish within %v (a %d s test): the server may be unreachable or stalled",
				strings.Join(args, " "), limit, o.Seconds+o.Omit)
		}
		r, perr := parseReport(out)
		switch {
		case perr == nil && r.Error != "" && (isBusy(r.Error) || reached && isRefused(r.Error)) && attempt <= o.Retries:
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return Sample{}, "", ctx.Err()
			}
			wait *= 2
			continue
		case perr == nil && r.Error != "" && isBusy(r.Error):
			return Sample{}, "", fmt.Errorf("%w with another client's test (%d attempts): an iperf3 server runs one test at a time; try again later, or start another server (iperf3 -s -p PORT): iperf3 said %q",
				ErrBusy, attempt, r.Error)
		case perr == nil && r.Error != "":
			return Sample{}, "", fmt.Errorf("iperf3 %s: %s", strings.Join(args, " "), r.Error)
		case runErr != nil:
			return Sample{}, "", fmt.Errorf("running iperf3 %s: %w", strings.Join(args, " "), runErr)
		case perr != nil:
			return Sample{}, "", fmt.Errorf("reading the report of iperf3 %s: %w", strings.Join(args, " "), perr)
		}
		s, err := r.sample(n)
		if err != nil {
			return Sample{}, "", fmt.Errorf("report of iperf3 %s: %w", strings.Join(args, " "), err)
		}
		s.Attempts = attempt
		return s, r.Start.Version, nil
	}
}

// isBusy tells iperf3's "the server is busy running a test. try again
// later" from other errors.
func isBusy(msg string) bool { return strings.Contains(strings.ToLower(msg), "server is busy") }

// isRefused tells a refused connection: an iperf3 server closes its
// listener between two tests and opens it again, so a test that comes
// just after another may find nothing listening for a moment (seen on a
// loaded machine). Once a test of the estimate has reached the server,
// a refusal is retried as a busy server is; before, it fails at once (a
// wrong host or port).
func isRefused(msg string) bool {
	return strings.Contains(strings.ToLower(msg), "connection refused")
}

// report is the part of iperf3's -J output that Estimate reads.
type report struct {
	Start struct {
		Version   string `json:"version"`
		TestStart struct {
			Protocol   string `json:"protocol"`
			NumStreams int    `json:"num_streams"`
		} `json:"test_start"`
	} `json:"start"`
	Intervals []struct {
		Sum struct {
			Bytes   int64 `json:"bytes"`
			Omitted bool  `json:"omitted"`
		} `json:"sum"`
	} `json:"intervals"`
	End struct {
		SumSent *struct {
			Bytes       int64 `json:"bytes"`
			Retransmits int64 `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived *struct {
			Seconds       float64 `json:"seconds"`
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
	} `json:"end"`
	// Error is set when the test failed (refused, busy, interrupted,
	// ...). iperf3 3.12 exits 0 after some of these when run with -J, so
	// this field, not the exit status, says whether a test worked.
	Error string `json:"error"`
}

func parseReport(b []byte) (report, error) {
	var r report
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return r, errors.New("no output (want iperf3's -J report)")
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("not an iperf3 -J report: %w", err)
	}
	return r, nil
}

// sample checks a successful report of a test with n streams and reads
// its sample.
func (r report) sample(n int) (Sample, error) {
	if r.End.SumReceived == nil || r.End.SumSent == nil {
		return Sample{}, errors.New("no end.sum_received/sum_sent (not a TCP test?)")
	}
	if p := r.Start.TestStart.Protocol; p != "" && p != "TCP" {
		return Sample{}, fmt.Errorf("protocol %s, want TCP", p)
	}
	if got := r.Start.TestStart.NumStreams; got != n {
		return Sample{}, fmt.Errorf("report is of %d streams, want %d", got, n)
	}
	rcv := r.End.SumReceived
	if !(rcv.BitsPerSecond > 0) || math.IsInf(rcv.BitsPerSecond, 0) || !(rcv.Seconds > 0) {
		return Sample{}, fmt.Errorf("received %g bit/s over %g s: nothing measured", rcv.BitsPerSecond, rcv.Seconds)
	}
	s := Sample{
		Streams:     n,
		Throughput:  rcv.BitsPerSecond / 8,
		Seconds:     rcv.Seconds,
		BytesSent:   r.End.SumSent.Bytes,
		Retransmits: r.End.SumSent.Retransmits,
	}
	// end.sum_sent leaves the omitted start out; it was sent all the same.
	for _, iv := range r.Intervals {
		if iv.Sum.Omitted {
			s.BytesSent += iv.Sum.Bytes
		}
	}
	return s, nil
}

// maxStderr bounds what is kept of iperf3's standard error.
const maxStderr = 4 << 10

// Exec returns the Runner that runs the iperf3 program bin (a name looked
// up in $PATH, or a path). When ctx ends, iperf3 gets SIGTERM, on which it
// ends the test with the server (which is then free for the next client
// at once) and exits; if it has not within a few seconds, it is killed.
func Exec(bin string) Runner {
	return func(ctx context.Context, args []string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 5 * time.Second
		var stdout bytes.Buffer
		stderr := &limitedBuffer{max: maxStderr}
		cmd.Stdout, cmd.Stderr = &stdout, stderr
		err := cmd.Run()
		switch {
		case errors.Is(err, exec.ErrNotFound):
			return nil, fmt.Errorf("%s is not installed (Debian/Ubuntu: apt-get install iperf3): %w", bin, err)
		case err != nil && stderr.String() != "":
			return stdout.Bytes(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return stdout.Bytes(), err
	}
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
