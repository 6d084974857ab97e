//go:build !linux

package execevents

import "errors"

// Source delivers the PIDs of the processes that exec'd; only on Linux.
type Source struct{}

// Open fails: there are no perf events here; the watcher polls.
func Open() (*Source, error) { return nil, errors.New("exec events need Linux") }

// Wait never returns PIDs here.
func (s *Source) Wait(pids []int, limit int) ([]int, bool, error) {
	return pids, false, errors.New("closed")
}

// Lost is always 0 here.
func (s *Source) Lost() uint64 { return 0 }

// CPUs is always 0 here.
func (s *Source) CPUs() int { return 0 }

// Close does nothing here.
func (s *Source) Close() error { return nil }
