//go:build !linux

package pmsample

import "time"

// threadCPU is unknown off Linux.
func threadCPU() time.Duration { return 0 }
