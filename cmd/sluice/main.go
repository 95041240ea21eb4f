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
	if err := newRoot().Execute(); err != nil {
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
	root.AddCommand(newTraceCmd(), newSimCmd(), newModelCmd())
	root.AddCommand(newAgentCmd(), newKeygenCmd(), newTokenCmd(), newCpCmd())
	root.AddCommand(newServeCmd(), newSubmitCmd(), newStatusCmd(), newWatchCmd(), newCancelCmd(),
		newEndpointsCmd(), newLoginCmd(), newTestbedCmd(), newEstimateCmd())
	return root
}
