//go:build !linux

package bench

import "time"

// selfCPU is not measured outside Linux.
func selfCPU() (time.Duration, bool) { return 0, false }

// pidCPU is not measured outside Linux.
func pidCPU(int) (time.Duration, bool) { return 0, false }

// cpuTicks is not measured outside Linux.
func cpuTicks() (steal, total int64, ok bool) { return 0, 0, false }
