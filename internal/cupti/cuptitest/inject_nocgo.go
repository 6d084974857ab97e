//go:build !cgo

package cuptitest

import "testing"

// Inject needs cgo to reach the fake library; without it the test is skipped.
func Inject(t testing.TB, faults string) { t.Skip("cuptitest.Inject needs cgo") }

// SetFaults needs cgo; without it the test is skipped.
func SetFaults(t testing.TB, faults string) { t.Skip("cuptitest.SetFaults needs cgo") }

// Query needs cgo; without it the test is skipped.
func Query(t testing.TB, key string) uint64 { t.Skip("cuptitest.Query needs cgo"); return 0 }
