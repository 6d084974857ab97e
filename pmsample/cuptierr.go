package pmsample

import (
	"errors"
	"fmt"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
)

// Errors the sampling loop acts on. cuptiDevice wraps binding errors into them (classify), so
// the loop and its tests depend only on these.
var (
	errBusy       = errors.New("performance counters busy: another client (a profiler the exporter does not recognise, a second exporter) holds them; sampling resumes when they free")
	errPrivileges = errors.New("no permission to use performance counters: run as root or with CAP_PERFMON (CAP_SYS_ADMIN before driver R565), or load the driver with NVreg_RestrictProfilingToAdminUsers=0")
	errOverflow   = errors.New("hardware buffer overflowed: the session is recreated")
)

// classify wraps err with the loop's sentinel for its CUPTI result, if any.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cupti.ErrHardwareBusy):
		return fmt.Errorf("%w: %w", err, errBusy)
	case errors.Is(err, cupti.ErrInsufficientPrivileges):
		return fmt.Errorf("%w: %w", err, errPrivileges)
	case errors.Is(err, cupti.ErrOutOfMemory):
		return fmt.Errorf("%w: %w", err, errOverflow)
	}
	return err
}
