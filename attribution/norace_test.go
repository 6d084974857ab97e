//go:build !race

package attribution

const raceEnabled = false
