//go:build !unix

package loadgen

import "time"

// selfCPU is not measured on this system.
func selfCPU() time.Duration { return 0 }
