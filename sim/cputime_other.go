//go:build !linux

package sim

import "time"

// haveCPUTime says whether threadCPU and processCPU measure anything:
// only on Linux.
const haveCPUTime = false

func threadCPU() time.Duration  { return 0 }
func processCPU() time.Duration { return 0 }
