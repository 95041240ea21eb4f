package gridftp

import "syscall"

// serverProcAttr puts the test server in its own process group, so that
// cleanup also ends the children it forks per connection, and has the
// kernel kill it if the test binary dies first (a timeout panic runs no
// cleanups).
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
