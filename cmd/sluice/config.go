package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Every flag of every command can be set in three places besides the
// command line, which beats them all: an environment variable, then the
// configuration file, then the flag's default. A flag's variable is
// SLUICE_ and its name in capitals with dashes as underscores (--data-dir
// is SLUICE_DATA_DIR, --server SLUICE_SERVER). The file is TOML: keys at
// its top apply to every command that has such a flag, a section per
// command ([serve], [agent], [endpoint.add]) to that command alone and
// before the top's; keys are spelled as the flags are (data-dir).
// Services started by systemd read the packaged /etc/sluice/sluice.toml,
// and so does every command run on that host, so that an operator's
// `sluice status` finds what the services were told (the site's CA, say).

const (
	// configFileFlag names the configuration file (its variable is
	// SLUICE_CONFIG_FILE, by the rule above).
	configFileFlag = "config-file"
	// defaultConfigFile is read when it exists and no other file is
	// named: where the package installs its commented file.
	defaultConfigFile = "/etc/sluice/sluice.toml"
	envPrefix         = "SLUICE_"
	// sourceAnnotation records, on a flag set by configure, where its
	// value came from (a variable, or the file and its section), for
	// withSources.
	sourceAnnotation = "sluice-source"
)

// addConfigFileFlag gives root (and so every command) --config-file.
func addConfigFileFlag(root *cobra.Command) {
	root.PersistentFlags().String(configFileFlag, "", "TOML file of settings for every command (default "+defaultConfigFile+" when it exists, or $SLUICE_CONFIG_FILE); precedence: flag, then $SLUICE_FLAG_NAME, then this file, then the default")
}

// envName is the environment variable that sets flag, or "" for the
// flags no variable sets: --help and --version, which only print, and
// one whose variable would be SLUICE_CONFIG, which has named the file
// `sluice login` writes since before variables set flags (serve's
// --config, its older JSON file of settings, is not set by it).
func envName(flag string) string {
	if flag == "help" || flag == "version" || flag == "config" {
		return ""
	}
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// envAnnotation names, on a flag, the environment variable that sets it
// when that is not the one envName gives: cp's --token takes data tokens
// (SLUICE_DATA_TOKEN), while SLUICE_TOKEN is the API token of the
// service's commands, cp's --api-token among them.
const envAnnotation = "sluice-env"

// envFor is the environment variable that sets f.
func envFor(f *pflag.Flag) string {
	if v := f.Annotations[envAnnotation]; len(v) == 1 {
		return v[0]
	}
	return envName(f.Name)
}

// settable says whether the configuration file may set flag: not --help
// and --version, nor --config-file itself.
func settable(flag string) bool {
	return flag != "help" && flag != "version" && flag != configFileFlag
}

// settings is a parsed configuration file.
type settings struct {
	file string         // its name, for errors
	top  map[string]any // its top-level table: common keys and sections
}

// configure sets each flag of cmd that its command line did not: from
// its environment variable (getenv), else from the configuration file
// (--config-file, else $SLUICE_CONFIG_FILE, else defaultFile if it
// exists), whose every section and key it checks against cmd's tree
// first. It is the root's PersistentPreRunE.
func configure(cmd *cobra.Command, getenv func(string) (string, bool), defaultFile string) error {
	// Shells' completion requests run no command and must not fail on a
	// broken file: the user would see nothing at all.
	if cmd.Name() == cobra.ShellCompRequestCmd || cmd.Name() == cobra.ShellCompNoDescRequestCmd {
		return nil
	}
	name, explicit := "", true
	if f := cmd.Flags().Lookup(configFileFlag); f != nil && f.Changed {
		name = f.Value.String()
	} else if v, ok := getenv(envName(configFileFlag)); ok && v != "" {
		name = v
	} else {
		name, explicit = defaultFile, false
	}
	var s *settings
	if name != "" {
		var err error
		if s, err = loadSettings(name); errors.Is(err, fs.ErrNotExist) && !explicit {
			s = nil // no packaged file here: defaults and variables only
		} else if err != nil {
			return err
		} else if err := s.check(cmd.Root()); err != nil {
			return err
		}
	}
	return s.apply(cmd, getenv)
}

// loadSettings reads and parses the TOML file name.
func loadSettings(name string) (*settings, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("configuration file: %w", err)
	}
	top := map[string]any{}
	if err := toml.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("configuration file %s: %w", name, err)
	}
	return &settings{file: name, top: top}, nil
}

// sectionName is how errors name the section of cmd: [serve],
// [endpoint.add], or "top level" for the root's keys, which apply to
// every command.
func sectionName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return "top level"
	}
	return "[" + strings.ReplaceAll(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), " ", ".") + "]"
}

// lookupFlag finds cmd's flag name, its own or one inherited from a
// parent, whether or not the command line has been parsed.
func lookupFlag(cmd *cobra.Command, name string) *pflag.Flag {
	if f := cmd.Flags().Lookup(name); f != nil {
		return f
	}
	return cmd.InheritedFlags().Lookup(name)
}

// sortedKeys gives t's keys in order, so that the first error reported
// is always the same one.
func sortedKeys(t map[string]any) []string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// check says the first section that names no command, or key that names
// no flag of its section's command, anywhere in the file, so that a
// misspelt setting is an error on the first command run and not a
// setting silently ignored.
func (s *settings) check(root *cobra.Command) error {
	all := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { all[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { all[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return s.checkTable(root, s.top, all)
}

func (s *settings) checkTable(cmd *cobra.Command, t map[string]any, all map[string]bool) error {
	for _, key := range sortedKeys(t) {
		where := fmt.Sprintf("%s: %s %s", s.file, sectionName(cmd), key)
		var sub *cobra.Command
		for _, c := range cmd.Commands() {
			if c.Name() == key {
				sub = c
			}
		}
		switch v := t[key].(type) {
		case map[string]any:
			if sub == nil {
				return fmt.Errorf("%s: no such command: %s %s", where, cmd.CommandPath(), key)
			}
			if err := s.checkTable(sub, v, all); err != nil {
				return err
			}
			continue
		case []map[string]any:
			return fmt.Errorf("%s: an array of tables; want a section [...] of a command or a key = value", where)
		}
		if !settable(key) {
			return fmt.Errorf("%s: cannot be set in the configuration file", where)
		}
		known := all[key]
		if cmd.HasParent() {
			known = lookupFlag(cmd, key) != nil
		}
		if known {
			continue
		}
		hint := ""
		if alt := strings.ReplaceAll(key, "_", "-"); alt != key && (all[alt] && !cmd.HasParent() || cmd.HasParent() && lookupFlag(cmd, alt) != nil) {
			hint = fmt.Sprintf(" (keys are spelled as the flags are: %s)", alt)
		}
		if !cmd.HasParent() {
			return fmt.Errorf("%s: no command has a --%s flag%s", where, key, hint)
		}
		return fmt.Errorf("%s: %s has no --%s flag%s", where, cmd.CommandPath(), key, hint)
	}
	return nil
}

// section is cmd's table in the file, or nil.
func (s *settings) section(cmd *cobra.Command) map[string]any {
	if !cmd.HasParent() {
		return s.top
	}
	parent := s.section(cmd.Parent())
	t, _ := parent[cmd.Name()].(map[string]any)
	return t
}

// lookup finds the file's value for cmd's flag f: in cmd's section,
// else in a parent command's section when f is that command's
// persistent flag, else at the top; and says which section it was in.
func (s *settings) lookup(cmd *cobra.Command, f *pflag.Flag) (any, *cobra.Command, bool) {
	for c := cmd; c != nil; c = c.Parent() {
		if c != cmd && c.HasParent() && c.PersistentFlags().Lookup(f.Name) != f {
			continue
		}
		if v, ok := s.section(c)[f.Name]; ok {
			if _, table := v.(map[string]any); !table {
				return v, c, true
			}
		}
	}
	return nil, nil, false
}

// apply sets each flag of cmd not given on its command line from its
// environment variable, else from s (which may be nil: no file).
func (s *settings) apply(cmd *cobra.Command, getenv func(string) (string, bool)) error {
	var first error
	flags := cmd.Flags()
	flags.VisitAll(func(f *pflag.Flag) {
		if first != nil || f.Changed || !settable(f.Name) {
			return
		}
		// An empty variable is an unset one, as SLUICE_SERVER= was
		// before variables set flags.
		if env := envFor(f); env != "" {
			if v, ok := getenv(env); ok && v != "" {
				if err := flags.Set(f.Name, v); err != nil {
					first = fmt.Errorf("environment variable %s=%q: %w", env, v, err)
					return
				}
				_ = flags.SetAnnotation(f.Name, sourceAnnotation, []string{env})
				return
			}
		}
		if s == nil {
			return
		}
		v, in, ok := s.lookup(cmd, f)
		if !ok {
			return
		}
		if err := setFromFile(flags, f, v); err != nil {
			first = fmt.Errorf("%s: %s %s = %s: %w", s.file, sectionName(in), f.Name, tomlValue(v), err)
			return
		}
		_ = flags.SetAnnotation(f.Name, sourceAnnotation, []string{s.file + " " + sectionName(in)})
	})
	return first
}

// withSources adds to a command's error the origin of each flag it names
// that was not on the command line: `sluice agent --token-key K` with
// SLUICE_SERVER in the environment fails "--token-key and --server exclude
// each other", which is a puzzle until it says "--server from
// SLUICE_SERVER".
func withSources(cmd *cobra.Command, err error) error {
	if cmd == nil || err == nil {
		return err
	}
	msg := err.Error()
	var notes []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		src := f.Annotations[sourceAnnotation]
		if len(src) > 0 && namesFlag(msg, f.Name) {
			notes = append(notes, fmt.Sprintf("--%s from %s", f.Name, src[0]))
		}
	})
	if len(notes) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(notes, "; "))
}

// namesFlag says whether msg holds --name as a whole flag (--server, not
// --server-id).
func namesFlag(msg, name string) bool {
	for rest := msg; ; {
		i := strings.Index(rest, "--"+name)
		if i < 0 {
			return false
		}
		rest = rest[i+2+len(name):]
		if rest == "" || !(rest[0] == '-' || rest[0] >= 'a' && rest[0] <= 'z' || rest[0] >= '0' && rest[0] <= '9') {
			return true
		}
	}
}

// setFromFile sets f to the TOML value v: a list for a flag that takes
// several values (--pull-from a,b), a string, number or boolean for any
// flag, as if given on the command line.
func setFromFile(flags *pflag.FlagSet, f *pflag.Flag, v any) error {
	if list, ok := v.([]any); ok {
		sv, ok := f.Value.(pflag.SliceValue)
		if !ok {
			return fmt.Errorf("--%s takes one value, not a list", f.Name)
		}
		items := make([]string, len(list))
		for i, item := range list {
			s, err := scalarString(item)
			if err != nil {
				return fmt.Errorf("item %d: %w", i+1, err)
			}
			items[i] = s
		}
		if err := sv.Replace(items); err != nil {
			return fmt.Errorf("invalid list for --%s: %w", f.Name, err)
		}
		f.Changed = true
		return nil
	}
	s, err := scalarString(v)
	if err != nil {
		return err
	}
	return flags.Set(f.Name, s)
}

// scalarString is a TOML string, number or boolean as it would be
// written on the command line.
func scalarString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	default:
		return "", fmt.Errorf("want a string, number or boolean, not %T", v)
	}
}

// tomlValue shows v as the file wrote it, for errors.
func tomlValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}
