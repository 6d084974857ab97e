//go:build race

package pmsample

// raceEnabled is set when the tests run under the race detector (timing tests that a slowed decode defeats skip).
const raceEnabled = true
