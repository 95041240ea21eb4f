package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// pullFrom restricts the sources of pulls (Config.PullFrom).
type pullFrom struct {
	hosts map[string]bool // host:port as source URLs name it
	nets  []netip.Prefix  // addresses connected to
}

func parsePullFrom(list []string) (*pullFrom, error) {
	if len(list) == 0 {
		return nil, nil
	}
	pf := &pullFrom{hosts: map[string]bool{}}
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			pf.nets = append(pf.nets, p.Masked())
		} else if a, err := netip.ParseAddr(s); err == nil {
			a = a.Unmap()
			pf.nets = append(pf.nets, netip.PrefixFrom(a, a.BitLen()))
		} else if h, port, err := net.SplitHostPort(s); err == nil && h != "" && port != "" {
			pf.hosts[hostPort(s)] = true
		} else {
			return nil, fmt.Errorf("agent: pull source %q: want host:port, an IP address or a CIDR prefix", s)
		}
	}
	return pf, nil
}

// hostPort is addr's host:port as compared: the host lowercased.
func hostPort(addr string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.ToLower(addr)
	}
	return net.JoinHostPort(strings.ToLower(h), p)
}

// refusedByDefault reports addresses an agent without Config.PullFrom
// never pulls from: link-local ones (a cloud's metadata service answers
// at 169.254.169.254, and no DTN is reached there), the metadata
// services clouds put elsewhere (metadataAddrs), and multicast. (Not
// loopback or the unspecified address, which reaches this host as
// loopback does: one-host set-ups name their agents so.) A PullFrom list
// that names them allows them.
func refusedByDefault(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() ||
		slices.Contains(metadataAddrs, a)
}

// metadataAddrs are cloud metadata services outside the link-local
// range: AWS's over IPv6 and Alibaba Cloud's.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

func (pf *pullFrom) allowsIP(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range pf.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func refusedSource(addr string) error {
	return &statusError{http.StatusForbidden, kindPermission,
		fmt.Errorf("source %s is not one this agent pulls from", addr)}
}

// checkURL is check for an agent's base URL (scheme://host:port).
func (pf *pullFrom) checkURL(base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return refusedSource(base)
	}
	if pf == nil {
		if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && refusedByDefault(a) {
			return refusedSource(u.Host)
		}
		return nil
	}
	return pf.check(u.Host)
}

// check refuses, before anything is fetched, a source named by host:port
// or IP address outside the list. A host name not listed may still
// resolve to a listed network: the dial decides.
func (pf *pullFrom) check(hostport string) error {
	if pf == nil || pf.hosts[hostPort(hostport)] {
		return nil
	}
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return refusedSource(hostport)
	}
	if a, err := netip.ParseAddr(h); err == nil && !pf.allowsIP(a) {
		return refusedSource(hostport)
	}
	if len(pf.nets) == 0 {
		return refusedSource(hostport)
	}
	return nil
}

// dial connects to a listed host:port, or to an address in a listed
// network. The address is checked as connected to, after resolution, so
// a name cannot be made to resolve elsewhere between check and dial.
func (pf *pullFrom) dial(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if pf.hosts[hostPort(addr)] {
			return d.DialContext(ctx, network, addr)
		}
		dd := *d
		dd.Control = func(_, address string, _ syscall.RawConn) error {
			if ap, err := netip.ParseAddrPort(address); err != nil || !pf.allowsIP(ap.Addr()) {
				return refusedSource(addr)
			}
			return nil
		}
		return dd.DialContext(ctx, network, addr)
	}
}

// dialDefault connects to anything but the addresses refusedByDefault
// names, checked as connected to (a host name may resolve to one).
func dialDefault(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		dd := *d
		dd.Control = func(_, address string, _ syscall.RawConn) error {
			if ap, err := netip.ParseAddrPort(address); err != nil || refusedByDefault(ap.Addr()) {
				return refusedSource(addr)
			}
			return nil
		}
		return dd.DialContext(ctx, network, addr)
	}
}

// restrict gives client a transport that dials only what pf allows (pf
// nil: what refusedByDefault does not refuse).
func (pf *pullFrom) restrict(client *http.Client) (*http.Client, error) {
	t, ok := client.Transport.(*http.Transport)
	if client.Transport == nil {
		t, ok = http.DefaultTransport.(*http.Transport), true
	}
	if !ok {
		return nil, errors.New("agent: pull sources can be restricted only with an *http.Transport")
	}
	t = t.Clone()
	// Through a proxy, what is dialled is the proxy, not the source.
	t.Proxy = nil
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if pf == nil {
		t.DialContext = dialDefault(d)
	} else {
		t.DialContext = pf.dial(d)
	}
	t.DialTLSContext = nil
	c := *client
	c.Transport = t
	return &c, nil
}
