package cuptitest

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	chipsOnce sync.Once
	chipsDir  string
	chipsErr  error
)

// ChipsDataDir is the repository's per-chip captures (testdata/chips: CHIP.tsv.gz and
// CHIP.passes, written by `cupti-exporter metrics chips --capture`).
func ChipsDataDir() string {
	return filepath.Clean(filepath.Join(srcDir(), "..", "..", "..", "testdata", "chips"))
}

// Chips lists the chips that have a capture in ChipsDataDir, sorted.
func Chips(t testing.TB) []string {
	t.Helper()
	ms, err := filepath.Glob(filepath.Join(ChipsDataDir(), "*.passes"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, strings.TrimSuffix(filepath.Base(m), ".passes"))
	}
	return out
}

// ChipCatalogs unpacks the captures into a folder the fake reads (once per test binary) and
// returns it: pass it to the fake as the catalogs=DIR knob, with chip=NAME for the devices'
// chip (Inject(t, "catalogs="+dir+",chip=GA100")).
func ChipCatalogs(t testing.TB) string {
	t.Helper()
	chipsOnce.Do(func() { chipsDir, chipsErr = unpackChips() })
	if chipsErr != nil {
		t.Fatalf("unpacking the chip captures: %v", chipsErr)
	}
	return chipsDir
}

func unpackChips() (string, error) {
	dir, err := os.MkdirTemp("", "cupti-fake-chips-")
	if err != nil {
		return "", err
	}
	src := ChipsDataDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".passes"):
			err = copyFile(filepath.Join(dir, name), filepath.Join(src, name), false)
		case strings.HasSuffix(name, ".tsv.gz"):
			err = copyFile(filepath.Join(dir, strings.TrimSuffix(name, ".gz")), filepath.Join(src, name), true)
		}
		if err != nil {
			return "", err
		}
	}
	return dir, nil
}

func copyFile(dst, src string, gunzip bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	var r io.Reader = in
	if gunzip {
		zr, err := gzip.NewReader(in)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = io.LimitReader(zr, 64<<20) // a catalog is about 100 KB
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
