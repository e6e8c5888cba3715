//go:build !linux

package bench

import (
	"errors"
	"runtime"
	"time"
)

// selfUsage is not measured outside Linux.
func selfUsage() (time.Duration, int64, bool) { return 0, 0, false }

// pidFaults is not measured outside Linux.
func pidFaults(int) (int64, bool) { return 0, false }

// pidCPU is not measured outside Linux.
func pidCPU(int) (time.Duration, bool) { return 0, false }

// readSteal is not measured outside Linux.
func readSteal() stealReading { return stealReading{} }

// pidWait is not measured outside Linux.
func pidWait(int) (time.Duration, int64, bool) { return 0, 0, false }

// renice is not supported outside Linux.
func renice(int, int) error { return errors.New("not supported on " + runtime.GOOS) }
