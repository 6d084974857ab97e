package pmsample

import "syscall"

// decodeNice is the nice value of the threads that decode and evaluate PM samples. The
// hardware buffer fills at a fixed rate whatever else the host runs, so these threads go
// before scrapes and other work: 200 scrapers on the same H200 host made 1 ms sampling lose
// 39 % of its samples to late decodes at the default priority (docs/gpu-validation.md run S).
const decodeNice = -10

// raisePriority lowers the calling OS thread's nice value (Linux applies it to the thread, not
// the process). It needs CAP_SYS_NICE, which root has; without it the thread keeps its
// priority and the error says so.
func raisePriority() error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), decodeNice)
}
