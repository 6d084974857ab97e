// Command tickcpu measures what the exporter's timetable costs a process that does nothing else:
// tickers of the exporter's periods (100 ms, 250 ms, 500 ms, 1 s), each with a goroutine that
// takes its ticks and makes one system call for each (as the exporter's loops make system or cgo
// calls; -call=raw: a raw one, which the Go scheduler is not told of; none: nothing), as Go timers
// (what internal/tick was) or as internal/tick's Tickers (timerfds on Linux), and prints the
// process's CPU and voluntary context switches a second over the window (docs/performance.md,
// "The timetable's timers").
//
//	go run ./scripts/cpu/tickcpu -timers=go|tick [-call=sys|raw|none] [-window=20s]
package main

import (
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/cupti-exporter/cupti-exporter/internal/tick"
)

var periods = []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second}

func main() {
	timers := flag.String("timers", "tick", "go: Go timers on the timetable; tick: internal/tick")
	window := flag.Duration("window", 20*time.Second, "how long to measure")
	call := flag.String("call", "sys", "what each tick's goroutine does: sys (a pread as Go makes it), raw (a raw pread), none")
	flag.Parse()
	f, err := os.Open("/proc/loadavg")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buf := make([]byte, 128)
	for _, d := range periods {
		var c <-chan time.Time
		switch *timers {
		case "go":
			c = goTicker(d)
		case "tick":
			c = tick.New(d).C
		default:
			fmt.Fprintln(os.Stderr, "-timers: go or tick")
			os.Exit(2)
		}
		fd := f.Fd()
		go func() {
			for range c {
				switch *call {
				case "sys":
					_, _ = syscall.Pread(int(fd), buf, 0)
				case "raw":
					_, _, _ = syscall.RawSyscall6(syscall.SYS_PREAD64, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
				}
			}
		}()
	}
	c0, v0 := cpu()
	time.Sleep(*window)
	c1, v1 := cpu()
	fmt.Printf("%s, call %s: %.2f ms of CPU a second, %.1f voluntary context switches a second\n", *timers, *call,
		float64(c1-c0)/1e6/window.Seconds(), float64(v1-v0)/window.Seconds())
}

// goTicker ticks at whole multiples of d as internal/tick did before it used timerfds.
func goTicker(d time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	until := func() time.Duration { return d - time.Duration(time.Now().UnixNano())%d }
	var t *time.Timer
	t = time.AfterFunc(until(), func() {
		select {
		case c <- time.Now():
		default:
		}
		t.Reset(until())
	})
	return c
}

// cpu is the process's CPU time and voluntary context switches so far.
func cpu() (time.Duration, int64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw
}
