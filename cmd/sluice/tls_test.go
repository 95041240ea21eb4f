package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeTLS: with a site authority made by `sluice ca`, the server
// serves HTTPS; curl without the authority fails and with it succeeds;
// the command line says how to fix an untrusted certificate and works
// with --ca; an agent joins over HTTPS trusting the authority, and
// refuses, at once and saying why, a server whose certificate is for
// another name.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caDir := filepath.Join(dir, "ca")
	if out, err := run(t, "ca", "init", "--dir", caDir); err != nil {
		t.Fatalf("ca init: %v\n%s", err, out)
	}
	caFile := filepath.Join(caDir, "ca.pem")
	issue := func(out string, hosts ...string) {
		t.Helper()
		args := append([]string{"ca", "issue", "--dir", caDir, "--out", filepath.Join(dir, out)}, hosts...)
		if o, err := run(t, args...); err != nil {
			t.Fatalf("ca issue: %v\n%s", err, o)
		}
	}
	issue("good", "127.0.0.1", "localhost")
	issue("wrong", "sched.example.org")

	serve := func(cert string) (addr, data string, p *proc) {
		addr, data = freeAddr(t), filepath.Join(dir, cert+"-data")
		p = startProc(t, "serve", "--listen", addr, "--data-dir", data, "--heartbeat-timeout", "3",
			"--tls-cert", filepath.Join(dir, cert+".pem"), "--tls-key", filepath.Join(dir, cert+".key"))
		waitListening(t, addr, p)
		return addr, data, p
	}
	addr, data, srv := serve("good")
	if !srv.waitOutput(10*time.Second, "API https://"+addr) || strings.Contains(srv.output(), "plain HTTP") {
		t.Errorf("the startup line does not say HTTPS:\n%s", srv.output())
	}
	token, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(token))

	if _, err := exec.LookPath("curl"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		url := "https://" + addr + "/v1/status"
		if out, err := exec.CommandContext(ctx, "curl", "-sS", "-o", "/dev/null", url).CombinedOutput(); err == nil {
			t.Errorf("curl without the site's authority succeeded: %s", out)
		}
		out, err := exec.CommandContext(ctx, "curl", "-sS", "-f", "--cacert", caFile, "-H", "Authorization: Bearer "+tok, url).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "scheduler") {
			t.Errorf("curl with the site's authority: %v: %s", err, out)
		}
	} else {
		t.Log("curl is not installed: the command line stands in for it")
	}

	// The command line: an error that names the fix, then success.
	if out, err := run(t, "status", "--server", "https://"+addr, "--token", tok); err == nil || !strings.Contains(err.Error(), "--ca FILE") {
		t.Errorf("status without the authority: %v\n%s; want an error naming --ca", err, out)
	}
	if out, err := run(t, "status", "--server", "https://"+addr, "--token", tok, "--ca", caFile); err != nil {
		t.Errorf("status with --ca: %v\n%s", err, out)
	}

	// An agent joins over HTTPS, trusting the authority...
	root := filepath.Join(dir, "a1")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	ag := startProc(t, "agent", "--listen", freeAddr(t), "--root", root, "--name", "a1", "--server", "https://"+addr,
		"--join-token", "@"+filepath.Join(data, "join.token"), "--ca", caFile)
	if !ag.waitOutput(20*time.Second, "joined https://"+addr) {
		t.Fatalf("the agent did not join over HTTPS:\n%s", ag.output())
	}
	// ... and refuses a server whose certificate is another name's.
	addr2, data2, _ := serve("wrong")
	root2 := filepath.Join(dir, "a2")
	if err := os.Mkdir(root2, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := startProc(t, "agent", "--listen", freeAddr(t), "--root", root2, "--name", "a2", "--server", "https://"+addr2,
		"--join-token", "@"+filepath.Join(data2, "join.token"), "--ca", caFile)
	exited := make(chan error, 1)
	go func() { exited <- bad.cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(bad.output(), "sched.example.org") || !strings.Contains(bad.output(), "sluice ca issue") {
			t.Errorf("an agent joining a server whose certificate is for another name exited %v:\n%s\nwant a refusal naming the certificate's name and the fix", err, bad.output())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("an agent kept trying a server whose certificate is for another name:\n%s", bad.output())
		bad.cmd.Process.Kill()
		<-exited
	}
	bad.cmd.Process = nil // waited for here: the cleanup must not wait again
	if strings.Contains(bad.output(), "joined") {
		t.Error("the agent joined a server whose certificate is another name's")
	}
}
