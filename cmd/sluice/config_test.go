package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// configured is what the commands of configTree were given.
type configured struct {
	listen, agentListen, root, name, server string
	dataDir                                 string
	cycle                                   float64
	workers                                 int
	verbose                                 bool
	timeout                                 time.Duration
	peers                                   []string
	ran                                     string
}

// configTree is a small command tree with a flag of each kind: serve
// (string, float, int, bool, duration, string slice), agent (a --listen of
// its own), endpoint add (beside endpoint's persistent --server) and
// version (no flags), configured as newRoot's is but with getenv and the
// default file given.
func configTree(g *configured, getenv func(string) (string, bool), defaultFile string) *cobra.Command {
	root := &cobra.Command{Use: "sluice", SilenceUsage: true, SilenceErrors: true}
	addConfigFileFlag(root)
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		return configure(cmd, getenv, defaultFile)
	}
	run := func(cmd *cobra.Command, args []string) error { g.ran = cmd.CommandPath(); return nil }
	serve := &cobra.Command{Use: "serve", RunE: run}
	f := serve.Flags()
	f.StringVar(&g.listen, "listen", "127.0.0.1:8080", "")
	f.StringVar(&g.dataDir, "data-dir", "", "")
	f.Float64Var(&g.cycle, "cycle", 0.5, "")
	f.IntVar(&g.workers, "workers", 1, "")
	f.BoolVar(&g.verbose, "verbose", false, "")
	f.DurationVar(&g.timeout, "timeout", 10*time.Second, "")
	f.StringSliceVar(&g.peers, "peers", []string{"default"}, "")
	agent := &cobra.Command{Use: "agent", RunE: run}
	agent.Flags().StringVar(&g.agentListen, "listen", ":7000", "")
	agent.Flags().StringVar(&g.root, "root", "", "")
	endpoint := &cobra.Command{Use: "endpoint"}
	endpoint.PersistentFlags().StringVar(&g.server, "server", "", "")
	add := &cobra.Command{Use: "add", RunE: run}
	add.Flags().StringVar(&g.name, "name", "", "")
	endpoint.AddCommand(add)
	version := &cobra.Command{Use: "version", RunE: run}
	root.AddCommand(serve, agent, endpoint, version)
	return root
}

// TestConfigure: a flag not on the command line comes from its
// environment variable, else the configuration file (the command's
// section, then a parent's for its persistent flags, then the top),
// else its default; every kind of flag can be set each way; a misspelt
// section or key anywhere in the file and a bad value are errors that
// name the file, the section and the key (or the variable).
func TestConfigure(t *testing.T) {
	def := configured{listen: "127.0.0.1:8080", agentListen: ":7000", cycle: 0.5, workers: 1, timeout: 10 * time.Second, peers: []string{"default"}}
	with := func(change func(*configured)) configured {
		g := def
		g.peers = append([]string(nil), def.peers...)
		change(&g)
		return g
	}
	const all = `
[serve]
listen = ":9000"
cycle = 2
workers = 4
verbose = true
timeout = "90s"
peers = ["a", "b"]
`
	for _, tc := range []struct {
		name string
		file string // written to the default file's place; "" for none
		env  map[string]string
		args []string
		want configured // with ran
		errs []string   // the error must hold each of these; "FILE" is the file's name
	}{
		{name: "defaults without a file", args: []string{"serve"},
			want: with(func(g *configured) { g.ran = "sluice serve" })},
		{name: "file beats default", file: all, args: []string{"serve"},
			want: with(func(g *configured) {
				g.listen, g.cycle, g.workers, g.verbose, g.timeout, g.peers, g.ran = ":9000", 2, 4, true, 90*time.Second, []string{"a", "b"}, "sluice serve"
			})},
		{name: "environment beats file", file: all, args: []string{"serve"},
			env: map[string]string{"SLUICE_LISTEN": ":9100", "SLUICE_CYCLE": "0.25", "SLUICE_WORKERS": "8", "SLUICE_VERBOSE": "false", "SLUICE_TIMEOUT": "2m", "SLUICE_PEERS": "x,y,z"},
			want: with(func(g *configured) {
				g.listen, g.cycle, g.workers, g.verbose, g.timeout, g.peers, g.ran = ":9100", 0.25, 8, false, 2*time.Minute, []string{"x", "y", "z"}, "sluice serve"
			})},
		{name: "flag beats environment", file: all, args: []string{"serve", "--listen", ":9200", "--workers=16", "--peers", "p", "--verbose=false"},
			env: map[string]string{"SLUICE_LISTEN": ":9100", "SLUICE_WORKERS": "8", "SLUICE_PEERS": "x"},
			want: with(func(g *configured) {
				g.listen, g.cycle, g.workers, g.verbose, g.timeout, g.peers, g.ran = ":9200", 2, 16, false, 90*time.Second, []string{"p"}, "sluice serve"
			})},
		{name: "an empty variable is unset", file: all, args: []string{"serve"}, env: map[string]string{"SLUICE_LISTEN": ""},
			want: with(func(g *configured) {
				g.listen, g.cycle, g.workers, g.verbose, g.timeout, g.peers, g.ran = ":9000", 2, 4, true, 90*time.Second, []string{"a", "b"}, "sluice serve"
			})},
		{name: "top level for every command, the section first", args: []string{"agent"},
			file: "listen = \":1\"\nroot = \"/data\"\n[serve]\nlisten = \":2\"\n",
			want: with(func(g *configured) { g.agentListen, g.root, g.ran = ":1", "/data", "sluice agent" })},
		{name: "the section beats the top level", args: []string{"serve"},
			file: "listen = \":1\"\n[serve]\nlisten = \":2\"\n",
			want: with(func(g *configured) { g.listen, g.ran = ":2", "sluice serve" })},
		{name: "a subcommand's section and its parent's persistent flag", args: []string{"endpoint", "add"},
			file: "[endpoint]\nserver = \"https://sched:8443\"\n[endpoint.add]\nname = \"dtn1\"\n",
			want: with(func(g *configured) { g.server, g.name, g.ran = "https://sched:8443", "dtn1", "sluice endpoint add" })},
		{name: "a command with no section", file: all, args: []string{"version"},
			want: with(func(g *configured) { g.ran = "sluice version" })},
		{name: "a scalar for a list flag", file: "[serve]\npeers = \"a,b\"\n", args: []string{"serve"},
			want: with(func(g *configured) { g.peers, g.ran = []string{"a", "b"}, "sluice serve" })},
		{name: "a named file instead of the default", file: "[serve]\nlisten = \":1\"\n", args: []string{"--config-file", "OTHER", "serve"},
			want: with(func(g *configured) { g.listen, g.ran = ":3", "sluice serve" })},
		{name: "SLUICE_CONFIG_FILE names the file", file: "[serve]\nlisten = \":1\"\n", args: []string{"serve"}, env: map[string]string{"SLUICE_CONFIG_FILE": "OTHER"},
			want: with(func(g *configured) { g.listen, g.ran = ":3", "sluice serve" })},

		{name: "unknown key", file: "[serve]\nlistn = \":1\"\n", args: []string{"serve"},
			errs: []string{"FILE", "[serve] listn", "sluice serve has no --listn flag"}},
		{name: "unknown key in another command's section", file: "[agent]\nrooot = \"/data\"\n", args: []string{"serve"},
			errs: []string{"FILE", "[agent] rooot", "no --rooot flag"}},
		{name: "unknown key at the top", file: "colour = \"blue\"\n", args: []string{"version"},
			errs: []string{"FILE", "top level colour", "no command has a --colour flag"}},
		{name: "unknown section", file: "[srve]\nlisten = \":1\"\n", args: []string{"serve"},
			errs: []string{"FILE", "srve", "no such command: sluice srve"}},
		{name: "unknown nested section", file: "[endpoint.ad]\nname = \"x\"\n", args: []string{"version"},
			errs: []string{"FILE", "[endpoint] ad", "no such command: sluice endpoint ad"}},
		{name: "a key spelt as its variable", file: "[serve]\ndata_dir = \"/x\"\n", args: []string{"serve"},
			errs: []string{"FILE", "[serve] data_dir", "spelled as the flags are: data-dir"}},
		{name: "a key spelt as its variable at the top", file: "data_dir = \"/x\"\n", args: []string{"version"},
			errs: []string{"FILE", "top level data_dir", "spelled as the flags are: data-dir"}},
		{name: "bad number", file: "[serve]\ncycle = \"fast\"\n", args: []string{"serve"},
			errs: []string{"FILE", `[serve] cycle = "fast"`, "invalid argument"}},
		{name: "bad integer", file: "[serve]\nworkers = 2.5\n", args: []string{"serve"},
			errs: []string{"FILE", "[serve] workers = 2.5"}},
		{name: "bad boolean", file: "[serve]\nverbose = \"sometimes\"\n", args: []string{"serve"},
			errs: []string{"FILE", `[serve] verbose = "sometimes"`}},
		{name: "a duration without its unit", file: "[serve]\ntimeout = 90\n", args: []string{"serve"},
			errs: []string{"FILE", "[serve] timeout = 90", "missing unit"}},
		{name: "a list for a one-value flag", file: "[serve]\nlisten = [\":1\", \":2\"]\n", args: []string{"serve"},
			errs: []string{"FILE", "[serve] listen", "takes one value, not a list"}},
		{name: "a bad value at the top", file: "workers = \"many\"\n", args: []string{"serve"},
			errs: []string{"FILE", `top level workers = "many"`}},
		{name: "bad variable", args: []string{"serve"}, env: map[string]string{"SLUICE_WORKERS": "many"},
			errs: []string{`SLUICE_WORKERS="many"`, "invalid argument"}},
		{name: "the file cannot name a file", file: "config-file = \"/x\"\n", args: []string{"serve"},
			errs: []string{"FILE", "config-file", "cannot be set"}},
		{name: "not TOML", file: "[serve]\nlisten = :1\n", args: []string{"serve"},
			errs: []string{"FILE", "line 2"}},
		{name: "a named file that is missing", args: []string{"--config-file", "MISSING", "serve"},
			errs: []string{"MISSING", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "sluice.toml")
			if tc.file != "" {
				if err := os.WriteFile(file, []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			other := filepath.Join(dir, "other.toml")
			if err := os.WriteFile(other, []byte("[serve]\nlisten = \":3\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			subst := strings.NewReplacer("OTHER", other, "MISSING", filepath.Join(dir, "missing.toml"))
			getenv := func(k string) (string, bool) {
				v, ok := tc.env[k]
				return subst.Replace(v), ok
			}
			var g configured
			root := configTree(&g, getenv, file)
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = subst.Replace(a)
			}
			root.SetArgs(args)
			root.SetOut(new(bytes.Buffer))
			err := root.Execute()
			if tc.errs != nil {
				if err == nil {
					t.Fatalf("no error; want one saying %q", tc.errs)
				}
				for _, w := range tc.errs {
					w = strings.ReplaceAll(w, "FILE", file)
					if !strings.Contains(err.Error(), subst.Replace(w)) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if g.ran != "" {
					t.Errorf("%s ran despite the error", g.ran)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, tc.want) {
				t.Errorf("got  %+v\nwant %+v", g, tc.want)
			}
		})
	}
}

// TestConfigFileRealCommand: the real command tree reads the file: a
// list (a flag given several times on the command line), a bool and a
// string of `sluice sim compare` from its [sim.compare] section.
func TestConfigFileRealCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sluice.toml")
	if err := os.WriteFile(file, []byte("[sim.compare]\ntrace = [\"25\"]\nschedulers = \"basecc1,seal\"\njson = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "--config-file", file, "sim", "compare")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Traces []struct {
			Trace      string                     `json:"trace"`
			Schedulers map[string]json.RawMessage `json:"schedulers"`
		} `json:"traces"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON (json = true): %v\n%s", err, out)
	}
	if len(got.Traces) != 1 || got.Traces[0].Trace != "25" || len(got.Traces[0].Schedulers) != 2 || got.Traces[0].Schedulers["seal"] == nil {
		t.Errorf("want trace 25 under basecc1 and seal, got %s", out)
	}
}

// TestPackagedConfigFile: the commented configuration file the package
// installs (dist/sluice.toml) is valid as shipped, and so is each of its
// commented examples once uncommented: every section names a command,
// every key a flag of it, and every value is one the flag takes, for
// every command of the tree. A flag renamed or removed fails here, not
// on a facility's host after an upgrade.
func TestPackagedConfigFile(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "..", "dist", "sluice.toml"))
	if err != nil {
		t.Fatal(err)
	}
	example := regexp.MustCompile(`(?m)^# ([a-z][a-z0-9-]* = )`)
	if n := len(example.FindAll(shipped, -1)); n < 20 {
		t.Fatalf("only %d commented examples in the shipped file: the test's pattern no longer finds them", n)
	}
	noEnv := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		name string
		text []byte
	}{
		{"as shipped", shipped},
		{"with every example", example.ReplaceAll(shipped, []byte("$1"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "sluice.toml")
			if err := os.WriteFile(file, tc.text, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := loadSettings(file)
			if err != nil {
				t.Fatal(err)
			}
			root := newRoot()
			if err := s.check(root); err != nil {
				t.Fatal(err)
			}
			var walk func(c *cobra.Command)
			walk = func(c *cobra.Command) {
				if err := c.ParseFlags(nil); err != nil {
					t.Fatalf("%s: %v", c.CommandPath(), err)
				}
				if err := s.apply(c, noEnv); err != nil {
					t.Errorf("%s: %v", c.CommandPath(), err)
				}
				for _, sub := range c.Commands() {
					walk(sub)
				}
			}
			walk(root)
			serve, _, err := root.Find([]string{"serve"})
			if err != nil {
				t.Fatal(err)
			}
			if dir, _ := serve.Flags().GetString("data-dir"); dir != "/var/lib/sluice" {
				t.Errorf("serve's data directory is %q, want /var/lib/sluice, the unit's StateDirectory", dir)
			}
		})
	}
}

// TestConfigErrorSources: an error naming a flag the command line did not
// give says where its value came from, the variable or the file's section;
// a flag given on the command line, and one the error does not name, get
// no note.
func TestConfigErrorSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sluice.toml")
	if err := os.WriteFile(file, []byte("[agent]\nroot = \"/data\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SLUICE_LISTEN": ":7001"}
	for _, tc := range []struct {
		args []string
		err  string
		want string // the whole message
	}{
		{[]string{"agent"}, "--listen and --root exclude each other",
			"--listen and --root exclude each other (--listen from SLUICE_LISTEN; --root from " + file + " [agent])"},
		{[]string{"agent", "--listen", ":7002"}, "--listen and --root exclude each other",
			"--listen and --root exclude each other (--root from " + file + " [agent])"},
		{[]string{"agent"}, "--listen-address is bad", "--listen-address is bad"},
		{[]string{"agent"}, "no flag named", "no flag named"},
	} {
		var g configured
		root := configTree(&g, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, file)
		agent, _, err := root.Find([]string{"agent"})
		if err != nil {
			t.Fatal(err)
		}
		agent.RunE = func(*cobra.Command, []string) error { return errors.New(tc.err) }
		root.SetArgs(tc.args)
		cmd, err := root.ExecuteC()
		if got := withSources(cmd, err); got == nil || got.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.args, got, tc.want)
		}
	}
}

// isolateConfig keeps this host's configuration out of the tests (run
// from TestMain, before them): no /etc/sluice/sluice.toml of an installed
// package, and no SLUICE_ variable of a flag left in the developer's shell
// (SLUICE_SERVER would make a standalone agent's start fail). Tests set
// the variables they mean with t.Setenv, which children inherit.
func isolateConfig() {
	os.Setenv(envName(configFileFlag), os.DevNull)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if env := envFor(f); env != "" && f.Name != configFileFlag {
				os.Unsetenv(env)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}
