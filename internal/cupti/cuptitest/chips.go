package cuptitest

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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

// unpackChips unpacks the captures once per content: into a folder named by their hash, made
// under a temporary name and renamed into place, so test binaries running at once share it and
// none leaves a folder behind.
func unpackChips() (string, error) {
	src := ChipsDataDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	dir := filepath.Join(os.TempDir(), "cupti-fake-chips-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp("", "cupti-fake-chips-tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".passes"):
			err = copyFile(filepath.Join(tmp, name), filepath.Join(src, name), false)
		case strings.HasSuffix(name, ".tsv.gz"):
			err = copyFile(filepath.Join(tmp, strings.TrimSuffix(name, ".gz")), filepath.Join(src, name), true)
		}
		if err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return dir, nil // another test binary was first
		}
		return "", err
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
