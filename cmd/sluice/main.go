// Command sluice schedules and moves bulk scientific data between storage
// endpoints. This file only wires subcommands; the work is done by the
// packages they call.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root, stopProfile := newRoot(), func() {}
	configured := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := configured(cmd, args); err != nil {
			return err
		}
		// A CPU profile of any command, for diagnosing Sluice's own cost
		// (benchmarks; sluice serve stops on SIGINT or SIGTERM and writes
		// it then).
		file, _ := cmd.Flags().GetString("cpuprofile")
		if file == "" {
			return nil
		}
		stop, err := startCPUProfile(file)
		if err != nil {
			return err
		}
		stopProfile = stop
		return nil
	}
	cmd, err := root.ExecuteC()
	stopProfile()
	if err != nil {
		err = withSources(cmd, err)
		// A command run by net exec has said why it failed.
		if !errors.As(err, new(*execStatusError)) {
			fmt.Fprintln(os.Stderr, "sluice:", err)
		}
		os.Exit(exitCode(err))
	}
}

// errInterrupted is the error of a command stopped by SIGINT or SIGTERM
// before it finished.
var errInterrupted = errors.New("interrupted")

// exitCode is the process's status for a command that failed with err:
// 130 (128 + SIGINT, as shells report a job stopped by Ctrl-C) when it was
// interrupted, so scripts can tell "stopped, resume later" from "failed";
// 1 otherwise.
func exitCode(err error) int {
	if errors.Is(err, errInterrupted) {
		return 130
	}
	// sluice net exec ends with the status of the command it ran.
	var exit *execStatusError
	if errors.As(err, &exit) {
		return exit.code
	}
	return 1
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Load-aware scheduling and movement of bulk data transfers",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("cpuprofile", "", "write a CPU profile of the command to this file")
	_ = root.PersistentFlags().MarkHidden("cpuprofile")
	// Flags not given on the command line come from their environment
	// variables and the configuration file (config.go).
	addConfigFileFlag(root)
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		return configure(cmd, os.LookupEnv, defaultConfigFile)
	}
	root.AddCommand(newTraceCmd(), newSimCmd(), newModelCmd())
	root.AddCommand(newAgentCmd(), newKeygenCmd(), newDataTokenCmd(), newAPITokenCmd(), newLegacyTokenCmd(), newAccessCmd(), newCpCmd(), newCACmd())
	root.AddCommand(newServeCmd(), newSubmitCmd(), newStatusCmd(), newWatchCmd(), newCancelCmd(),
		newEndpointsCmd(), newEndpointCmd(), newLoginCmd(), newTestbedCmd(), newEstimateCmd(), newNetCmd(), newVersionCmd(), newBackupCmd())
	// --version prints what `sluice version` does.
	root.Version = versionLine()
	root.SetVersionTemplate("{{.Version}}\n")
	setUsage(root)
	// sluice completion bash|zsh|fish|powershell works, unlisted: the
	// list of commands fits on a screen (docs/user-guide.md names it).
	root.CompletionOptions.HiddenDefaultCmd = true
	return root
}
