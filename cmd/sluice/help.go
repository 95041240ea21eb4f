package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Help is kept short (a screen, about 30 lines a command): a few lines of
// what the command does, its usage, examples, and the flags most runs
// need. The details are in the guides (docs/), and so are the flags few
// runs need: their names are listed after the others, with the guide that
// describes them (the test of the help checks that it does).

// moreFlagAnnotation marks a flag that the help names without describing
// (moreFlags); its value is the guide that describes it.
const moreFlagAnnotation = "sluice_more"

// moreFlags has cmd's help name the flags names without describing them,
// pointing to guide (a path in the repository, docs/...) for what they do.
func moreFlags(cmd *cobra.Command, guide string, names ...string) {
	for _, n := range names {
		f := cmd.Flags().Lookup(n)
		if f == nil {
			// A mistake in this program, not in its input: every test
			// that builds the commands (newRoot) finds it.
			panic(fmt.Sprintf("%s: no flag --%s to list under more flags", cmd.CommandPath(), n))
		}
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[moreFlagAnnotation] = []string{guide}
	}
}

// moreFlagsOf returns cmd's flags that its help names only, by name, and
// the guides that describe them.
func moreFlagsOf(cmd *cobra.Command) (names, guides []string) {
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if g := f.Annotations[moreFlagAnnotation]; len(g) > 0 && !f.Hidden {
			names = append(names, "--"+f.Name)
			if !slices.Contains(guides, g[0]) {
				guides = append(guides, g[0])
			}
		}
	})
	return names, guides
}

// setUsage gives root (and every command under it) the usage text of
// cobra's default but for the flags: those moreFlags marked are named
// after the others without their descriptions, and -h, --help (which
// every command has) is left out.
func setUsage(root *cobra.Command) {
	root.SetUsageFunc(func(c *cobra.Command) error {
		_, err := fmt.Fprint(c.OutOrStderr(), usageText(c))
		return err
	})
}

func usageText(c *cobra.Command) string {
	var b strings.Builder
	b.WriteString("Usage:")
	if c.Runnable() {
		fmt.Fprintf(&b, "\n  %s", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\n  %s [command]", c.CommandPath())
	}
	if len(c.Aliases) > 0 {
		fmt.Fprintf(&b, "\n\nAliases:\n  %s", c.NameAndAliases())
	}
	if c.HasExample() {
		fmt.Fprintf(&b, "\n\nExamples:\n%s", c.Example)
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("\n\nAvailable Commands:")
		// Not help (sluice help COMMAND works, unlisted: the last
		// line says how to get a command's help), as not completion.
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				fmt.Fprintf(&b, "\n  %-*s %s", s.NamePadding(), s.Name(), s.Short)
			}
		}
	}
	shown := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && len(f.Annotations[moreFlagAnnotation]) == 0 {
			shown.AddFlag(f)
		}
	})
	if shown.HasAvailableFlags() {
		fmt.Fprintf(&b, "\n\nFlags:\n%s", strings.TrimRight(shown.FlagUsages(), " \n"))
	}
	if names, guides := moreFlagsOf(c); len(names) > 0 {
		fmt.Fprintf(&b, "\n\nMore flags (in %s):\n%s", strings.Join(guides, ", "), wrapWords(names, "  ", 80))
	}
	if c.HasAvailableInheritedFlags() {
		fmt.Fprintf(&b, "\n\nGlobal Flags:\n%s", strings.TrimRight(c.InheritedFlags().FlagUsages(), " \n"))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\n\nUse \"%s [command] --help\" for more information about a command.", c.CommandPath())
	}
	b.WriteString("\n")
	return b.String()
}

// wrapWords joins words with spaces into lines of at most width columns
// (a longer word has a line of its own), each starting with indent.
func wrapWords(words []string, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, w := range words {
		if line != indent && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += w
	}
	b.WriteString(line)
	return b.String()
}
