package cupti

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestResultNames(t *testing.T) {
	for r, want := range map[Result]string{
		26: "CUPTI_ERROR_HARDWARE_BUSY (26)", 35: "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35)",
		8: "CUPTI_ERROR_OUT_OF_MEMORY (8)", 999: "CUPTI_ERROR_UNKNOWN (999)", 77: "CUPTI_ERROR_77 (77)",
	} {
		if got := r.Error(); got != want {
			t.Errorf("Result(%d).Error() = %q, want %q", int(r), got, want)
		}
	}
}

func TestCallErrorIs(t *testing.T) {
	cases := []struct {
		r        Result
		sentinel error
	}{
		{26, ErrHardwareBusy}, {35, ErrInsufficientPrivileges}, {40, ErrInsufficientPrivileges},
		{8, ErrOutOfMemory}, {27, ErrNotSupported}, {43, ErrNotSupported}, {17, ErrInvalidMetricName},
		{7, ErrInvalidOperation},
	}
	all := []error{ErrHardwareBusy, ErrInsufficientPrivileges, ErrOutOfMemory, ErrNotSupported,
		ErrInvalidMetricName, ErrInvalidOperation}
	for _, c := range cases {
		err := fmt.Errorf("device 0: %w", &CallError{Func: "cuptiPmSamplingSetConfig", Result: c.r})
		for _, s := range all {
			if got := errors.Is(err, s); got != (s == c.sentinel) {
				t.Errorf("errors.Is(%v, %v) = %v", err, s, got)
			}
		}
		if !errors.Is(err, c.r) {
			t.Errorf("errors.Is(%v, Result(%d)) = false", err, int(c.r))
		}
		var ce *CallError
		if !errors.As(err, &ce) || ce.Result != c.r {
			t.Errorf("errors.As(%v) = %v", err, ce)
		}
	}
	if errors.Is(&CallError{Func: "f", Result: 1}, ErrNotSupported) {
		t.Error("INVALID_PARAMETER must match no sentinel")
	}
}

func TestCallErrorText(t *testing.T) {
	e := &CallError{Func: "cuptiPmSamplingSetConfig", Result: 26, Detail: "CUPTI_ERROR_HARDWARE_BUSY"}
	s := e.Error()
	if !strings.HasPrefix(s, "cuptiPmSamplingSetConfig: CUPTI_ERROR_HARDWARE_BUSY (26); ") {
		t.Errorf("text %q", s)
	}
	for code, words := range map[Result][]string{
		35: {"root", "CAP_SYS_ADMIN", "NVreg_RestrictProfilingToAdminUsers=0"},
		26: {"ncu", "DCGM", "another exporter", "pause"},
		15: {"driver", "libnvperf_host.so"},
	} {
		msg := (&CallError{Func: "f", Result: code}).Error()
		for _, w := range words {
			if !strings.Contains(msg, w) {
				t.Errorf("%d: %q lacks %q", int(code), msg, w)
			}
		}
	}
	if (&CallError{Func: "f", Result: 9}).Result.Remedy() != "" {
		t.Error("HARDWARE has no remedy")
	}
}

func TestFeatureError(t *testing.T) {
	err := fmt.Errorf("x: %w", &FeatureError{Feature: "keep-latest", MinVersion: VersionAppendMode, Have: 25})
	if !errors.Is(err, ErrNotSupported) {
		t.Error("FeatureError must match ErrNotSupported")
	}
	if !strings.Contains(err.Error(), "26") || !strings.Contains(err.Error(), "25") {
		t.Errorf("text %q", err)
	}
}
