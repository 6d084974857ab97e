package pmsample

import (
	"syscall"
	"time"
)

// threadCPU is the CPU time (user + system) of the calling OS thread; the device goroutine is
// locked to its thread, so differences measure that device's decode thread alone.
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
