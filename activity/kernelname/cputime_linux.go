package kernelname

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID

// threadCPUTime runs f and returns the CPU time the thread spent on it: unlike the wall
// time, it does not grow when other work keeps the thread waiting for a CPU.
func threadCPUTime(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	wall := time.Now()
	start, ok := threadClock()
	f()
	end, ok2 := threadClock()
	if !ok || !ok2 { // no thread clock (seccomp): the wall time is an upper bound
		return time.Since(wall)
	}
	return end - start
}

func threadClock() (time.Duration, bool) {
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano()), errno == 0
}
