package main

import (
	"net"
	"os"
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
func secretArg(v string) (string, error) {
	name, ok := strings.CutPrefix(v, "@")
	if !ok {
		return v, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
