package wan

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// TestMain runs the detached forwarder when the tests start this binary as
// one (see detached).
func TestMain(m *testing.M) {
	if file := os.Getenv("WAN_TEST_FORWARD_STATE"); file != "" {
		if err := Forward(context.Background(), file); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testPrefix keeps the tests' namespaces apart from `sluice net up`'s.
const testPrefix = "slct-"

// needRoot skips a test that needs namespaces and TUN devices.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and TUN devices (CI runs make test as root)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
}

// detached makes Up start the forwarder as this test binary in forwarder
// mode, as `sluice net up` starts `sluice net forward`.
func detached(stateFile string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "state.json")
	cmd.Env = append(os.Environ(), "WAN_TEST_FORWARD_STATE="+stateFile)
	return cmd
}

func testOptions(t *testing.T) Options {
	return Options{Prefix: testPrefix, StateDir: t.TempDir()}
}
