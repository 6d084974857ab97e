//go:build !race

package pmsample

const raceEnabled = false
