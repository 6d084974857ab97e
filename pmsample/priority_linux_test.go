package pmsample

import (
	"os"
	"runtime"
	"syscall"
	"testing"
)

// TestRaisePriority checks that the decode threads' nice value applies to the calling thread
// only (the process and other threads keep theirs).
func TestRaisePriority(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs CAP_SYS_NICE (root): a lower nice value is refused otherwise")
	}
	before, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := raisePriority(); err != nil {
			t.Error(err)
		}
		p, _ := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
		got <- p
	}()
	// The raw syscall answers 20 - nice.
	if p := <-got; 20-p != decodeNice {
		t.Errorf("decode thread nice %d, want %d", 20-p, decodeNice)
	}
	if after, _ := syscall.Getpriority(syscall.PRIO_PROCESS, 0); after != before {
		t.Errorf("process priority changed from %d to %d: only the decode thread may change", before, after)
	}
}
