package wan

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// In-process sockets inside a host: a program that runs several hosts'
// roles in one process (the emulated testbed's server and agents) opens
// each host's sockets in that host's namespace. A socket belongs to the
// namespace it was created in for its whole life, whichever thread later
// uses it, so only its creation has to happen inside: on a thread locked
// to one goroutine, moved into the namespace and back.

// inNamespace runs fn on a thread inside the network namespace at nsPath.
// If the thread cannot be moved back, the goroutine ends locked, which
// ends the thread: no other goroutine ever runs in the wrong namespace.
func inNamespace(nsPath string, fn func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("wan: open this thread's namespace: %w", err)
			return
		}
		defer unix.Close(self)
		ns, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("wan: open namespace %s: %w", nsPath, err)
			return
		}
		defer unix.Close(ns)
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // still in its own namespace
			errc <- fmt.Errorf("wan: enter namespace %s: %w", nsPath, err)
			return
		}
		fn()
		if unix.Setns(self, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- nil
	}()
	return <-errc
}

// nsPath is the namespace file of host.
func (n *Net) nsPath(host string) (string, error) {
	if n.Profile.HostIndex(host) < 0 {
		return "", fmt.Errorf("wan: no host %q in profile %s", host, n.Profile.Name)
	}
	return filepath.Join(netnsDir, n.st.ns(host)), nil
}

// Listen listens on TCP port (0: any) at host's address, inside host: what
// a server on that host would open.
func (n *Net) Listen(host string, port int) (net.Listener, error) {
	path, err := n.nsPath(host)
	if err != nil {
		return nil, err
	}
	addr := netip.AddrPortFrom(n.Addr(host), uint16(port)).String()
	var ln net.Listener
	if nerr := inNamespace(path, func() { ln, err = net.Listen("tcp", addr) }); nerr != nil {
		return nil, nerr
	}
	if err != nil {
		return nil, fmt.Errorf("wan: listen in %s: %w", host, err)
	}
	return ln, nil
}

// DialFrom returns a DialContext that connects from inside host, as a
// program on host would: to another host, across the emulated network.
func (n *Net) DialFrom(host string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	path, err := n.nsPath(host)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialIn(ctx, path, network, addr)
	}, nil
}

// DialInto connects from outside the network to a host's address: from
// inside the host the address belongs to, over its loopback, so it costs
// no path. A control plane that sits beside the network (the testbed's
// server) reaches the hosts with it without loading their links.
func (n *Net) DialInto(ctx context.Context, network, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("wan: dial %s: not an address and port of a host: %w", addr, err)
	}
	for i, h := range n.Profile.Hosts {
		if Addr(i) == ap.Addr() {
			return dialIn(ctx, filepath.Join(netnsDir, n.st.ns(h.Name)), network, addr)
		}
	}
	return nil, fmt.Errorf("wan: dial %s: no host of %s has that address", addr, n.Profile.Name)
}

// dialIn dials addr on a socket made inside the namespace at path. The
// whole dial runs on the locked thread (net.Dialer makes and connects
// the socket in one call); it holds that thread for a round trip.
func dialIn(ctx context.Context, path, network, addr string) (net.Conn, error) {
	var c net.Conn
	var err error
	if nerr := inNamespace(path, func() {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
	}); nerr != nil {
		return nil, nerr
	}
	return c, err
}
