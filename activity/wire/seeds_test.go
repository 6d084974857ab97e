package wire

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var updateSeeds = flag.Bool("update", false, "rewrite testdata/fuzz/FuzzDecoder from seedStreams")

// TestFuzzSeeds keeps the checked-in fuzz corpus equal to seedStreams, so
// `go test` (which replays testdata/fuzz) always covers every frame type.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecoder")
	for i, s := range seedStreams(t) {
		path := filepath.Join(dir, fmt.Sprintf("seed%d", i))
		want := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
		if *updateSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is stale or missing (%v): run go test ./activity/wire -run TestFuzzSeeds -update", path, err)
		}
	}
}
