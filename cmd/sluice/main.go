// Command sluice schedules and moves bulk scientific data between storage
// endpoints. This file only wires subcommands; the work is done by the
// packages they call.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root, stopProfile := newRoot(), func() {}
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
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
	err := root.Execute()
	stopProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
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
	root.AddCommand(newTraceCmd(), newSimCmd(), newModelCmd())
	root.AddCommand(newAgentCmd(), newKeygenCmd(), newTokenCmd(), newAccessCmd(), newCpCmd())
	root.AddCommand(newServeCmd(), newSubmitCmd(), newStatusCmd(), newWatchCmd(), newCancelCmd(),
		newEndpointsCmd(), newLoginCmd(), newTestbedCmd(), newEstimateCmd())
	return root
}
