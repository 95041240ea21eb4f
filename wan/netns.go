package wan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// netnsDir is where `ip netns` keeps its named namespaces.
const netnsDir = "/run/netns"

// ip runs the ip command and returns its output, or an error naming the
// command and what it printed.
func ip(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("wan: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

const allowedCC = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"

// allowCC lets namespaces other than the first make cc their default: the
// kernel refuses (EPERM) a default outside tcp_allowed_congestion_control
// there, and that list is global. Adding to it only widens what may be
// chosen; the machine's own default is untouched.
func allowCC(cc string) error {
	data, err := os.ReadFile(allowedCC)
	if err != nil {
		return fmt.Errorf("wan: %w", err)
	}
	have := strings.Fields(string(data))
	for _, c := range have {
		if c == cc {
			return nil
		}
	}
	if err := os.WriteFile(allowedCC, []byte(strings.Join(append(have, cc), " ")), 0o644); err != nil {
		return fmt.Errorf("wan: allow congestion control %s: %w", cc, err)
	}
	return nil
}

// makeHost creates host h's namespace ns with its TCP settings, loopback up
// and a hosts file naming every host of p.
func makeHost(ctx context.Context, p *Profile, h Host, ns string) error {
	if _, err := ip(ctx, "netns", "add", ns); err != nil {
		return err
	}
	if _, err := ip(ctx, "-n", ns, "link", "set", "lo", "up"); err != nil {
		return err
	}
	// IPv6 off: the wan is IPv4 (198.18.0.0/15) and router solicitations
	// would only be noise on the TUN. Metrics are not saved so that one
	// test's ssthresh does not carry over to the next connection.
	sysctls := []string{
		"net.ipv6.conf.all.disable_ipv6=1",
		"net.ipv6.conf.default.disable_ipv6=1",
		"net.ipv4.tcp_no_metrics_save=1",
	}
	if h.CC != "" {
		if err := allowCC(h.CC); err != nil {
			return err
		}
		sysctls = append(sysctls, "net.ipv4.tcp_congestion_control="+h.CC)
	}
	if h.RmemMax > 0 {
		sysctls = append(sysctls, fmt.Sprintf("net.ipv4.tcp_rmem=4096 %d %d", min(131072, h.RmemMax), h.RmemMax))
	}
	if h.WmemMax > 0 {
		sysctls = append(sysctls, fmt.Sprintf("net.ipv4.tcp_wmem=4096 %d %d", min(16384, h.WmemMax), h.WmemMax))
	}
	args := append([]string{"netns", "exec", ns, "sysctl", "-q", "-w"}, sysctls...)
	if _, err := ip(ctx, args...); err != nil {
		return err
	}
	// Every host by name; and the machine's own name (namespaces share
	// it) as this host's address, since programs that look up their own
	// name (globus-url-copy, globus-gridftp-server) fail without it.
	var hosts strings.Builder
	hosts.WriteString("127.0.0.1\tlocalhost\n")
	self, _ := os.Hostname()
	for i, o := range p.Hosts {
		if o.Name == h.Name && self != "" && self != "localhost" && p.HostIndex(self) < 0 {
			fmt.Fprintf(&hosts, "%s\t%s\t%s\n", Addr(i), o.Name, self)
		} else {
			fmt.Fprintf(&hosts, "%s\t%s\n", Addr(i), o.Name)
		}
	}
	dir := filepath.Join("/etc/netns", ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("wan: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts.String()), 0o644); err != nil {
		return fmt.Errorf("wan: %w", err)
	}
	return nil
}

// configureTUN gives host i's wan0 its MTU, a long transmit queue (a
// forwarder that falls behind for a moment then loses nothing; what it
// does lose shows as tx_dropped in Status) and its address; the /15 route
// sends every other host's traffic through the device.
func configureTUN(ctx context.Context, ns string, i int, mtu int) error {
	if mtu == 0 {
		mtu = 1500
	}
	if _, err := ip(ctx, "-n", ns, "link", "set", TunName, "mtu", strconv.Itoa(mtu), "txqueuelen", "10000", "up"); err != nil {
		return err
	}
	_, err := ip(ctx, "-n", ns, "addr", "replace", Addr(i).String()+"/15", "dev", TunName)
	return err
}

// stale are the namespaces whose names start with prefix.
func stale(prefix string) ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wan: %w", err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// removeNamespace kills what runs in ns (only processes inside it) and
// deletes it and its /etc/netns directory.
func removeNamespace(ctx context.Context, ns string) error {
	if out, err := ip(ctx, "netns", "pids", ns); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	var errs []error
	if _, err := ip(ctx, "netns", "del", ns); err != nil {
		if _, serr := os.Stat(filepath.Join(netnsDir, ns)); serr == nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(filepath.Join("/etc/netns", ns)); err != nil {
		errs = append(errs, fmt.Errorf("wan: %w", err))
	}
	return errors.Join(errs...)
}

// tunStats are the kernel's counters of a host's wan0.
type tunStats struct {
	TxQueueLen int    `json:"txqueuelen"`
	TxDropped  uint64 `json:"tx_dropped"`
	RxDropped  uint64 `json:"rx_dropped"`
}

func readTunStats(ctx context.Context, ns string) (tunStats, error) {
	out, err := ip(ctx, "-n", ns, "-s", "-j", "link", "show", TunName)
	if err != nil {
		return tunStats{}, err
	}
	var v []struct {
		TxQueueLen int `json:"txqlen"`
		Stats      struct {
			Rx struct {
				Dropped uint64 `json:"dropped"`
			} `json:"rx"`
			Tx struct {
				Dropped uint64 `json:"dropped"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &v); err != nil || len(v) != 1 {
		return tunStats{}, fmt.Errorf("wan: read %s stats in %s: %v", TunName, ns, err)
	}
	return tunStats{TxQueueLen: v[0].TxQueueLen, TxDropped: v[0].Stats.Tx.Dropped, RxDropped: v[0].Stats.Rx.Dropped}, nil
}
