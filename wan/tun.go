package wan

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// TUN offload flags (include/uapi/linux/if_tun.h).
const (
	tunFCsum   = 0x01
	tunFTSO4   = 0x02
	tunFTSOECN = 0x08
)

// TunName is the device every host reaches the others through.
const TunName = "wan0"

// openTUN creates TUN device name inside the network namespace at nsPath
// and returns its file (non-blocking, so Close interrupts a Read). The
// device exists while the file is open: when the forwarder dies, so does
// the device. It is opened from a thread locked to this goroutine and
// moved into the namespace; that thread is never returned to the runtime
// (the goroutine exits locked, which ends the thread), so no other
// goroutine ever runs in the wrong namespace.
func openTUN(nsPath, name string) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err := openTUNHere(nsPath, name)
		ch <- result{f, err}
	}()
	r := <-ch
	return r.f, r.err
}

func openTUNHere(nsPath, name string) (*os.File, error) {
	ns, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("wan: open namespace %s: %w", nsPath, err)
	}
	defer unix.Close(ns)
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return nil, fmt.Errorf("wan: unshare: %w", err)
	}
	if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("wan: enter namespace %s: %w", nsPath, err)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("wan: open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("wan: tun name %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("wan: create tun %s in %s: %w", name, nsPath, err)
	}
	// With checksum and TSO offload the kernel hands over TCP super-packets
	// of up to 64 KB: one read and write per 64 KB instead of per MTU.
	if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunFCsum|tunFTSO4|tunFTSOECN); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("wan: tun offloads: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}
