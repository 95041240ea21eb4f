package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// advertiseURL is the agent's URL for others: --advertise, or the
// listening address (a wildcard host replaced by this host's name).
func advertiseURL(flag string, addr net.Addr, tls bool) string {
	if flag != "" {
		return flag
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "127.0.0.1"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// secretArg returns a flag's value, or the content of FILE for "@FILE".
// A FILE of ~ or ~/... is in the home directory: the shell expands ~ only
// at the start of a word, so it leaves --token @~/admin.token as it is.
func secretArg(v string) (string, error) {
	name, ok := strings.CutPrefix(v, "@")
	if !ok {
		return v, nil
	}
	name, err := expandHome(name)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// expandHome replaces a leading ~ (alone or before a /) with the user's
// home directory; ~user forms are left as they are.
func expandHome(name string) (string, error) {
	if name != "~" && !strings.HasPrefix(name, "~/") {
		return name, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return filepath.Join(home, name[1:]), nil
}
