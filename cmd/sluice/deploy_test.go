package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/internal/testout"
)

// guideStep is one block of a guide that a test runs: its commands, the
// host they run on, and whether they start a service that runs until
// stopped.
type guideStep struct {
	host    string
	service bool
	script  string
	line    int // where the block starts, for messages
}

var guideHost = regexp.MustCompile(`^# on ([a-z0-9.-]+)(, runs until stopped)?$`)

// guideSteps returns the blocks of a Markdown guide that start with
// "# on HOST" (fenced with ```sh), in order.
func guideSteps(md string) []guideStep {
	var steps []guideStep
	var cur *guideStep
	var body []string
	sc := bufio.NewScanner(strings.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && body == nil && line == "```sh":
			body = []string{}
		case body != nil && line == "```":
			if cur != nil {
				cur.script = strings.Join(body, "\n") + "\n"
				steps = append(steps, *cur)
			}
			cur, body = nil, nil
		case body != nil && len(body) == 0 && cur == nil:
			if m := guideHost.FindStringSubmatch(line); m != nil {
				cur = &guideStep{host: m[1], service: m[2] != "", line: n}
				continue
			}
			body = append(body, line)
		case body != nil:
			body = append(body, line)
		}
	}
	return steps
}

func TestGuideSteps(t *testing.T) {
	md := "text\n```sh\n# on a.example.org\necho 1\necho 2\n```\n```sh\nnot run\n```\n```\n# on b\n```\n```sh\n# on b.example.org, runs until stopped\nsleep 9\n```\n"
	got := guideSteps(md)
	want := []guideStep{{host: "a.example.org", script: "echo 1\necho 2\n", line: 3}, {host: "b.example.org", service: true, script: "sleep 9\n", line: 14}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("steps %+v, want %+v", got, want)
	}
}

// guideDirs are the directories each host of the deployment guide has of
// its own (bound over the real ones in the host's mount namespace).
var guideDirs = []string{"/etc/sluice", "/var/lib/sluice", "/srv/data"}

// TestDeployGuide follows the operator guide's deployment chapter
// (docs/deploy.md) command by command on three hosts of the emulated
// network, each with its own /etc/sluice, /var/lib/sluice, /srv/data,
// home and /etc/hosts naming the guide's hosts: a certificate authority,
// the server over TLS, two agents, an admin, a user with an access rule
// and a verified transfer. A command of the guide that fails fails the
// test, so the guide cannot rot.
func TestDeployGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	md, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	steps := guideSteps(string(md))
	if len(steps) < 5 {
		t.Fatalf("docs/deploy.md has %d blocks to run; its \"# on HOST\" lines are how the test finds them", len(steps))
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	n := upWAN(t, "campus")
	// The guide's hosts, on the profile's.
	hostOf := map[string]string{"sched.example.org": "client", "dtn1.example.org": "a", "dtn2.example.org": "b"}
	root := t.TempDir()
	var hosts strings.Builder
	hosts.WriteString("127.0.0.1 localhost\n")
	for name, h := range hostOf {
		fmt.Fprintf(&hosts, "%s %s %s\n", n.Addr(h), name, strings.Split(name, ".")[0])
		for _, d := range append([]string{"/home"}, guideDirs...) {
			if err := os.MkdirAll(filepath.Join(root, short(name), d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, "hosts"), []byte(hosts.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// Mount points for the hosts' own directories, made here if this
	// machine has none (and removed after, if still empty).
	for _, d := range guideDirs {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(d) })
		}
	}
	// sluice is this test binary (see TestMain); scp copies between the
	// hosts' trees.
	bin := filepath.Join(root, "bin")
	os.Mkdir(bin, 0o755)
	scripts := map[string]string{
		"sluice": fmt.Sprintf("#!/bin/bash\nIFS=$'\\x1f'\nexport SLUICE_TEST_RUN=\"$*\"\nexec %q -test.run='^$'\n", os.Args[0]),
		"scp": `#!/bin/bash
# scp between the guide's hosts: HOST:PATH is PATH in HOST's own tree.
set -euo pipefail
args=("$@"); dst=${args[-1]}; unset 'args[-1]'
for src in "${args[@]}"; do
	case $src in
	*:*) host=${src%%:*}; src=$GUIDE_ROOT/${host%%.*}${src#*:} ;;
	esac
	cp -- "$src" "$dst"
done
`,
	}
	for name, s := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// prelude gives a host its own directories, names and home.
	prelude := func(name string) string {
		var b strings.Builder
		b.WriteString("set -euo pipefail\n")
		fmt.Fprintf(&b, "mount --bind %q /etc/hosts\n", filepath.Join(root, "hosts"))
		for _, d := range guideDirs {
			fmt.Fprintf(&b, "mount --bind %q %q\n", filepath.Join(root, short(name), d), d)
		}
		fmt.Fprintf(&b, "export HOME=%q PATH=%q:$PATH GUIDE_ROOT=%q\ncd \"$HOME\"\n", filepath.Join(root, short(name), "home"), bin, root)
		// The caller's service settings are not the guide's: each host
		// reads its own /etc/sluice/sluice.toml (TestMain points
		// SLUICE_CONFIG_FILE at /dev/null for the other tests).
		b.WriteString("unset SLUICE_SERVER SLUICE_TOKEN SLUICE_CA SLUICE_CONFIG SLUICE_CONFIG_FILE SLUICE_DATA_TOKEN XDG_CONFIG_HOME XDG_STATE_HOME\n")
		return b.String()
	}
	ready := map[string]string{"sluice serve": "API https://", "sluice agent": " serving "}
	for _, st := range steps {
		h, ok := hostOf[st.host]
		if !ok {
			t.Fatalf("docs/deploy.md:%d: no host %s in the test's network", st.line, st.host)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd, err := n.Command(ctx, h, "bash", "-c", prelude(st.host)+st.script)
		if err != nil {
			t.Fatal(err)
		}
		if !st.service {
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("docs/deploy.md:%d, on %s: %v\n%s\noutput:\n%s", st.line, st.host, err, st.script, out)
			}
			t.Logf("docs/deploy.md:%d, on %s: ok\n%s", st.line, st.host, out)
			continue
		}
		var log testout.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			cancel()
			if t.Failed() {
				t.Logf("output of the service at docs/deploy.md:%d on %s:\n%s", st.line, st.host, log.String())
			}
		})
		want := ""
		for prefix, w := range ready {
			if strings.Contains(st.script, prefix) {
				want = w
			}
		}
		if want == "" {
			t.Fatalf("docs/deploy.md:%d: a service the test does not know how to wait for:\n%s", st.line, st.script)
		}
		if !log.WaitFor(30*time.Second, want) {
			t.Fatalf("docs/deploy.md:%d, on %s: the service did not start (no %q):\n%s", st.line, st.host, want, log.String())
		}
	}
	// The guide's transfer, checked here too.
	src := filepath.Join(root, "dtn1", "/srv/data/home/alice/run42/r00.h5")
	sameFile(t, src, filepath.Join(root, "dtn2", "/srv/data/home/alice/run42/r00.h5"))
	if _, err := os.Stat(filepath.Join(root, "dtn2", "/srv/data/home/alice/stolen.h5")); !os.IsNotExist(err) {
		t.Errorf("bob's file was copied into alice's home: %v", err)
	}
	if b, err := os.ReadFile(src); err != nil || len(b) != 20000000 {
		t.Errorf("the guide's test data: %d bytes, %v", len(b), err)
	}
	if !bytes.Contains(md, []byte("TestDeployGuide")) {
		t.Error("docs/deploy.md does not say that this test runs it")
	}
}

// short is a guide host's first label: its tree's directory.
func short(name string) string { return strings.Split(name, ".")[0] }
