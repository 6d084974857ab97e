//go:build race

package attribution

// raceEnabled is set when the tests run under the race detector (long runs skip).
const raceEnabled = true
