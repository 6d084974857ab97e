// Command execwake measures what the give-way watch (package profilers) costs a process that
// runs it and nothing else, while the host execs: its CPU and voluntary context switches a
// second over the window, woken by the kernel's exec records (-watch=exec), polling /proc every
// 100 ms (-watch=poll, through a link to /proc, which turns the exec records off) or not running
// (-watch=none, the baseline). Run it beside a loop that execs without pause, and alone
// (docs/performance.md, "The give-way watch woken by execs").
//
//	go run ./scripts/cpu/execwake -watch=exec|poll|none [-window=10s]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cupti-exporter/cupti-exporter/profilers"
)

func main() {
	window := flag.Duration("window", 10*time.Second, "how long to measure")
	watch := flag.String("watch", "exec", "exec: woken by exec records; poll: every 100 ms; none: the baseline")
	flag.Parse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	switch *watch {
	case "exec":
		go profilers.New(nil).Run(ctx)
	case "poll":
		link := filepath.Join(os.TempDir(), fmt.Sprintf("execwake-proc-%d", os.Getpid()))
		if err := os.Symlink("/proc", link); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer os.Remove(link)
		go profilers.New(nil, profilers.WithProcRoot(link)).Run(ctx)
	case "none":
	default:
		fmt.Fprintln(os.Stderr, "-watch: exec, poll or none")
		os.Exit(2)
	}
	time.Sleep(time.Second) // started
	c0, v0 := usage()
	time.Sleep(*window)
	c1, v1 := usage()
	s := window.Seconds()
	fmt.Printf("%s: %.2f ms of CPU a second, %.1f voluntary context switches a second\n", *watch, float64(c1-c0)/1e6/s, float64(v1-v0)/s)
	if os.Getenv("EXECWAKE_THREADS") != "" {
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, t := range tasks {
			b, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/status")
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "voluntary_ctxt_switches") {
					fmt.Println("  thread", t.Name(), l)
				}
			}
		}
	}
}

func usage() (time.Duration, int64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw
}
