// Package migname reads the names NVIDIA's DRA driver (k8s-dra-driver-gpu) gives the MIG
// partitions it publishes in its ResourceSlices: gpu-<minor>-mig-<profile name>-<GPU
// instance profile ID>-<placement start>, for example gpu-0-mig-1g10gb-19-0. The profile ID
// and placement name the GPU instance the driver creates for a claim, which NVML lists.
// Names come from the API server and are parsed in linear time with no allocation.
package migname

import (
	"strconv"
	"strings"
)

// Parse returns the GPU instance profile ID and placement start of a MIG partition's
// device name; ok is false for any other name.
func Parse(name string) (profileID, placementStart int, ok bool) {
	rest, found := strings.CutPrefix(name, "gpu-")
	if !found {
		return 0, 0, false
	}
	minor, rest, found := strings.Cut(rest, "-mig-")
	if !found || !digits(minor) {
		return 0, 0, false
	}
	// The profile name may hold dashes ("1g10gb-me"); the last two fields are the numbers.
	head, startText, found := cutLast(rest, "-")
	if !found {
		return 0, 0, false
	}
	profileName, profileText, found := cutLast(head, "-")
	if !found || profileName == "" || !digits(profileText) || !digits(startText) {
		return 0, 0, false
	}
	profileID, err1 := strconv.Atoi(profileText)
	placementStart, err2 := strconv.Atoi(startText)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return profileID, placementStart, true
}

func cutLast(s, sep string) (before, after string, found bool) {
	if k := strings.LastIndex(s, sep); k >= 0 {
		return s[:k], s[k+len(sep):], true
	}
	return s, "", false
}

// digits reports whether s is a short run of decimal digits (minors, profile IDs and
// placements are small; the bound keeps Atoi from overflowing).
func digits(s string) bool {
	if s == "" || len(s) > 6 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
