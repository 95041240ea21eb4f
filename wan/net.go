package wan

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults of Options.
const (
	DefaultPrefix   = "slc-"
	DefaultStateDir = "/run/sluice-net"
)

// ErrNotRoot is returned by Up without the privileges namespaces and TUN
// devices need.
var ErrNotRoot = errors.New("wan: needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces and TUN devices")

// Options say where a network's state lives and how its forwarder runs.
type Options struct {
	// Prefix starts every namespace's name (and the state files' names);
	// leftovers with this prefix are removed by Up. Default "slc-".
	Prefix string
	// StateDir holds the state file and control socket; default
	// /run/sluice-net.
	StateDir string
	// Forwarder, when set, makes the command that runs the forwarder as a
	// detached process (`sluice net forward --state FILE`); it is given
	// the state file. Without it the forwarder runs in this process until
	// Close.
	Forwarder func(stateFile string) *exec.Cmd
	// Clock and Seed drive an in-process forwarder (nil: real time; the
	// seed of its loss and jitter draws).
	Clock Clock
	Seed  uint64
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	return o
}

// state is what a running network leaves on disk for the CLI, the
// forwarder and the next Up.
type state struct {
	Prefix   string   `json:"prefix"`
	Profile  *Profile `json:"profile"`
	Detached bool     `json:"detached"`
	PID      int      `json:"pid"` // the forwarder's process
	Socket   string   `json:"socket"`
	Started  string   `json:"started"`
	Seed     uint64   `json:"seed"`
}

func (s *state) ns(host string) string { return s.Prefix + host }

func stateFile(o Options) string { return filepath.Join(o.StateDir, o.Prefix+"state.json") }

func writeState(file string, s *state) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("wan: %w", err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("wan: write state: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("wan: write state: %w", err)
	}
	return nil
}

func readState(file string) (*state, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("wan: state file %s: %w", file, err)
	}
	if s.Profile == nil || s.Prefix == "" {
		return nil, fmt.Errorf("wan: state file %s is incomplete", file)
	}
	return &s, nil
}

// Net is a running emulated network.
type Net struct {
	Profile *Profile
	opts    Options
	st      *state
	// In-process forwarder: cancel stops it, done reports its end.
	cancel context.CancelFunc
	done   chan error
}

// Up brings up profile p: namespaces, TUN devices, the forwarder. It
// returns once packets flow. If the same profile is already up under
// o.Prefix with a live forwarder, Up returns it unchanged; anything else
// left under the prefix (a killed forwarder's namespaces and state, or a
// different profile) is removed first.
func Up(ctx context.Context, p *Profile, o Options) (*Net, error) {
	o = o.withDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := checkRoot(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("wan: %w", err)
	}
	unlock, err := lockFile(filepath.Join(o.StateDir, o.Prefix+"lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	file := stateFile(o)
	if old, err := readState(file); err == nil && old.Detached && o.Forwarder != nil && alive(old.PID) && sameProfile(old.Profile, p) {
		n := &Net{Profile: old.Profile, opts: o, st: old}
		if _, err := n.Status(ctx); err == nil {
			return n, nil
		}
	}
	if err := teardown(ctx, o); err != nil {
		return nil, err
	}
	st := &state{Prefix: o.Prefix, Profile: p, Detached: o.Forwarder != nil, Socket: filepath.Join(o.StateDir, o.Prefix+"ctl.sock"),
		Started: time.Now().UTC().Format(time.RFC3339), Seed: o.Seed}
	n := &Net{Profile: p, opts: o, st: st}
	ok := false
	defer func() {
		if !ok {
			_ = n.stop()
			_ = teardown(context.WithoutCancel(ctx), o)
		}
	}()
	for _, h := range p.Hosts {
		if err := makeHost(ctx, p, h, st.ns(h.Name)); err != nil {
			return nil, err
		}
	}
	if err := writeState(file, st); err != nil {
		return nil, err
	}
	if o.Forwarder == nil {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		n.cancel, n.done = cancel, make(chan error, 1)
		ready := make(chan struct{})
		go func() { n.done <- serve(fctx, file, o.Clock, func() { close(ready) }) }()
		select {
		case <-ready:
		case err := <-n.done:
			n.done <- err
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else if err := startDetached(ctx, o, file); err != nil {
		return nil, err
	}
	st, err = readState(file)
	if err != nil {
		return nil, err
	}
	n.st = st
	ok = true
	return n, nil
}

// startDetached starts the forwarder process and waits until it answers.
func startDetached(ctx context.Context, o Options, file string) error {
	cmd := o.Forwarder(file)
	logFile := filepath.Join(o.StateDir, o.Prefix+"forwarder.log")
	lf, err := os.Create(logFile)
	if err != nil {
		return fmt.Errorf("wan: %w", err)
	}
	defer lf.Close()
	cmd.Stdout, cmd.Stderr, cmd.Stdin = lf, lf, nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("wan: start forwarder: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(20 * time.Second)
	for {
		if st, err := readState(file); err == nil && st.PID == cmd.Process.Pid {
			if _, err := control(ctx, st.Socket, request{Op: "status"}); err == nil {
				return nil
			}
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logFile)
			return fmt.Errorf("wan: forwarder exited (%v): %s", err, strings.TrimSpace(string(log)))
		case <-deadline:
			_ = cmd.Process.Kill()
			return errors.New("wan: forwarder did not start within 20 s (log: " + logFile + ")")
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Attach is the network running under o's prefix (for the CLI).
func Attach(o Options) (*Net, error) {
	o = o.withDefaults()
	st, err := readState(stateFile(o))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("wan: no network is up (no %s)", stateFile(o))
	}
	if err != nil {
		return nil, err
	}
	return &Net{Profile: st.Profile, opts: o, st: st}, nil
}

// Down removes whatever runs or is left under o's prefix.
func Down(ctx context.Context, o Options) error {
	o = o.withDefaults()
	if err := checkRoot(); err != nil {
		return err
	}
	unlock, err := lockFile(filepath.Join(o.StateDir, o.Prefix+"lock"))
	if err != nil {
		return err
	}
	defer unlock()
	return teardown(ctx, o)
}

// teardown stops a detached forwarder named by the state file and removes
// the namespaces and files under o's prefix.
func teardown(ctx context.Context, o Options) error {
	file := stateFile(o)
	if st, err := readState(file); err == nil && st.PID > 0 && st.PID != os.Getpid() && alive(st.PID) {
		if !st.Detached {
			return fmt.Errorf("wan: the network %s is run by process %d, still alive; stop it first", o.Prefix, st.PID)
		}
		if isForwarder(st.PID) {
			stopProcess(st.PID)
		}
	}
	var errs []error
	names, err := stale(o.Prefix)
	if err != nil {
		errs = append(errs, err)
	}
	for _, ns := range names {
		errs = append(errs, removeNamespace(ctx, ns))
	}
	// /etc/netns entries of namespaces already gone.
	if ents, err := os.ReadDir("/etc/netns"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), o.Prefix) {
				errs = append(errs, os.RemoveAll(filepath.Join("/etc/netns", e.Name())))
			}
		}
	}
	for _, f := range []string{file, filepath.Join(o.StateDir, o.Prefix+"ctl.sock")} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close stops the forwarder and removes everything Up made.
func (n *Net) Close() error { return n.close(context.Background()) }

// stop ends an in-process forwarder.
func (n *Net) stop() error {
	if n.cancel == nil {
		return nil
	}
	n.cancel()
	n.cancel = nil
	return <-n.done
}

func (n *Net) close(ctx context.Context) error {
	var errs []error
	if err := n.stop(); err != nil {
		errs = append(errs, err)
	}
	unlock, err := lockFile(filepath.Join(n.opts.StateDir, n.opts.Prefix+"lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if st, err := readState(stateFile(n.opts)); err == nil && st.Started != n.st.Started {
		// Someone else's network under the same prefix by now: leave it.
		return errors.Join(errs...)
	}
	errs = append(errs, teardown(ctx, n.opts))
	return errors.Join(errs...)
}

// Namespace is the network namespace of host.
func (n *Net) Namespace(host string) string { return n.st.ns(host) }

// Addr is host's address, or an invalid Addr if there is no such host.
func (n *Net) Addr(host string) netip.Addr {
	i := n.Profile.HostIndex(host)
	if i < 0 {
		return netip.Addr{}
	}
	return Addr(i)
}

// PID is the forwarder's process.
func (n *Net) PID() int { return n.st.PID }

// Command is a command that runs name inside host (ip netns exec, so the
// host's /etc/netns hosts file applies).
func (n *Net) Command(ctx context.Context, host, name string, args ...string) (*exec.Cmd, error) {
	if n.Profile.HostIndex(host) < 0 {
		return nil, fmt.Errorf("wan: no host %q in profile %s", host, n.Profile.Name)
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.st.ns(host), name}, args...)...), nil
}

// Exec runs name inside host and returns its combined output.
func (n *Net) Exec(ctx context.Context, host, name string, args ...string) ([]byte, error) {
	cmd, err := n.Command(ctx, host, name, args...)
	if err != nil {
		return nil, err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("wan: %s in %s: %w: %s", name, host, err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Status is the forwarder's view of the network.
func (n *Net) Status(ctx context.Context) (*Status, error) {
	r, err := control(ctx, n.st.Socket, request{Op: "status"})
	if err != nil {
		return nil, err
	}
	return r.Status, nil
}

// Set changes parameters while the network runs. target is "a>b" (one
// direction of a link), "a-b" (both directions) or a host name (its NIC).
func (n *Net) Set(ctx context.Context, target string, u Update) error {
	_, err := control(ctx, n.st.Socket, request{Op: "set", Target: target, Update: &u})
	return err
}

func checkRoot() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("wan: no TUN device: %w", err)
	}
	return nil
}

func sameProfile(a, b *Profile) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A zombie is not alive.
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(data, ')'); i > 0 && i+2 < len(data) && data[i+2] == 'Z' {
		return false
	}
	return true
}

// isForwarder says whether pid runs a forwarder (its command line names
// a state file), so a recycled pid is never killed.
func isForwarder(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(data, []byte("state.json"))
}

func stopProcess(pid int) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for range 100 {
		if !alive(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for range 100 {
		if !alive(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lockFile serialises Up and Down of one prefix between processes.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wan: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("wan: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// request and response are the control socket's protocol: one JSON
// request, one JSON answer per connection.
type request struct {
	Op     string  `json:"op"`
	Target string  `json:"target,omitempty"`
	Update *Update `json:"update,omitempty"`
}

type response struct {
	Status *Status `json:"status,omitempty"`
	Error  string  `json:"error,omitempty"`
}

func control(ctx context.Context, socket string, req request) (*response, error) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("wan: forwarder not reachable: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, fmt.Errorf("wan: control: %w", err)
	}
	var r response
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&r); err != nil {
		return nil, fmt.Errorf("wan: control: %w", err)
	}
	if r.Error != "" {
		return nil, errors.New(r.Error)
	}
	return &r, nil
}

// Forward runs the forwarder of the network whose state file is given,
// until ctx ends: the detached process `sluice net forward` runs this.
func Forward(ctx context.Context, stateFile string) error {
	return serve(ctx, stateFile, nil, func() {})
}

// serve opens every host's TUN, configures it, serves the control socket
// and forwards until ctx ends; ready is called once packets flow.
func serve(ctx context.Context, file string, clock Clock, ready func()) error {
	st, err := readState(file)
	if err != nil {
		return err
	}
	p := st.Profile
	tuns := make([]io.ReadWriteCloser, 0, len(p.Hosts))
	closeAll := func() {
		for _, t := range tuns {
			t.Close()
		}
	}
	for i, h := range p.Hosts {
		f, err := openTUN(filepath.Join(netnsDir, st.ns(h.Name)), TunName)
		if err != nil {
			closeAll()
			return err
		}
		tuns = append(tuns, f)
		if err := configureTUN(ctx, st.ns(h.Name), i, h.MTU); err != nil {
			closeAll()
			return err
		}
	}
	f := newForwarder(p, tuns, clock, st.Seed)
	_ = os.Remove(st.Socket)
	ln, err := net.Listen("unix", st.Socket)
	if err != nil {
		closeAll()
		return fmt.Errorf("wan: control socket: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.handle(ctx, st, c)
		}
	}()
	st.PID = os.Getpid()
	if err := writeState(file, st); err != nil {
		closeAll()
		return err
	}
	ready()
	return f.run(ctx)
}

func (f *forwarder) handle(ctx context.Context, st *state, c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var req request
	var resp response
	if err := json.NewDecoder(c).Decode(&req); err != nil {
		resp.Error = "wan: bad control request: " + err.Error()
	} else {
		switch req.Op {
		case "status":
			resp.Status = f.status(ctx, st)
		case "set":
			if req.Update == nil {
				resp.Error = "wan: set without an update"
			} else if err := f.set(req.Target, *req.Update); err != nil {
				resp.Error = err.Error()
			}
		default:
			resp.Error = fmt.Sprintf("wan: unknown control op %q", req.Op)
		}
	}
	_ = json.NewEncoder(c).Encode(resp)
}
