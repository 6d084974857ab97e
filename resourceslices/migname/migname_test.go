package migname

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name           string
		profile, start int
		ok             bool
	}{
		{"gpu-0-mig-1g10gb-19-0", 19, 0, true},
		{"gpu-3-mig-1g10gb-me-20-6", 20, 6, true}, // a profile name with a dash
		{"gpu-12-mig-7g80gb-0-0", 0, 0, true},
		{"gpu-0", 0, 0, false},
		{"gpu-0-mig-19-0", 0, 0, false}, // no profile name
		{"gpu-x-mig-1g10gb-19-0", 0, 0, false},
		{"gpu-0-mig-1g10gb-19-", 0, 0, false},
		{"gpu-0-mig-1g10gb-1a-0", 0, 0, false},
		{"gpu-0-mig-1g10gb-19-99999999999999999999", 0, 0, false},
		{"nic-0-mig-1g10gb-19-0", 0, 0, false},
		{"", 0, 0, false},
	} {
		p, s, ok := Parse(tc.name)
		if ok != tc.ok || (ok && (p != tc.profile || s != tc.start)) {
			t.Errorf("Parse(%q) = %d, %d, %v; want %d, %d, %v", tc.name, p, s, ok, tc.profile, tc.start, tc.ok)
		}
	}
}

// FuzzParse: any input is answered without a panic, in time linear in its length (a
// generous bound: the CI machine is shared), and a name Parse accepts starts like a MIG
// partition's and ends in the two numbers it returns.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"gpu-0-mig-1g10gb-19-0", "gpu-3-mig-1g10gb-me-20-6", "gpu--mig---", "gpu-0-mig-" + strings.Repeat("-", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		begin := time.Now()
		p, s, ok := Parse(name)
		if d := time.Since(begin); d > 100*time.Millisecond+time.Duration(len(name))*time.Microsecond {
			t.Errorf("Parse of %d bytes took %s", len(name), d)
		}
		if !ok {
			return
		}
		fields := strings.Split(name, "-")
		gotP, err1 := strconv.Atoi(fields[len(fields)-2])
		gotS, err2 := strconv.Atoi(fields[len(fields)-1])
		if err1 != nil || err2 != nil || gotP != p || gotS != s || !strings.HasPrefix(name, "gpu-") || !strings.Contains(name, "-mig-") {
			t.Errorf("Parse(%q) = %d, %d, true", name, p, s)
		}
	})
}
