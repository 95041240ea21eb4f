//go:build unix && !linux

package gridftp

import "syscall"

// serverProcAttr puts the test server in its own process group, so that
// cleanup also ends the children it forks per connection.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
