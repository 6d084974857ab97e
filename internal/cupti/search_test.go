package cupti

import (
	"path/filepath"
	"reflect"
	"testing"
)

func TestCandidatesOrder(t *testing.T) {
	env := map[string]string{"HOME": "/home/u", "VIRTUAL_ENV": "/venv"}
	getenv := func(k string) string { return env[k] }
	glob := func(p string) ([]string, error) {
		switch p {
		case "/usr/local/cuda/targets/x86_64-linux/lib":
			return []string{p}, nil
		case "/usr/local/cuda-13*/targets/x86_64-linux/lib":
			return []string{"/usr/local/cuda-13.0/targets/x86_64-linux/lib", "/usr/local/cuda-13.2/targets/x86_64-linux/lib"}, nil
		case "/venv/lib/python3*/site-packages/nvidia/cu13/lib":
			return []string{"/venv/lib/python3.12/site-packages/nvidia/cu13/lib"}, nil
		}
		return nil, nil
	}
	var got []string
	for _, c := range candidates(Options{}, getenv, glob) {
		got = append(got, c.path)
		if c.explicit {
			t.Errorf("%s marked explicit", c.path)
		}
	}
	want := []string{
		"libcupti.so.13", // the loader's path first
		"/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13",
		"/usr/local/cuda-13.2/targets/x86_64-linux/lib/libcupti.so.13", // newest first
		"/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13",
		"/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("candidates:\n got %q\nwant %q", got, want)
	}
}

func TestCandidatesExplicit(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{EnvLibrary: "/env/libcupti.so.13"}
	getenv := func(k string) string { return env[k] }
	glob := func(string) ([]string, error) { t.Fatal("explicit paths must not search"); return nil, nil }

	// Options.LibraryPath wins over the environment; a folder gets the soname appended.
	c := candidates(Options{LibraryPath: dir}, getenv, glob)
	if len(c) != 1 || c[0].path != filepath.Join(dir, "libcupti.so.13") || c[0].nvperfDir != dir || !c[0].explicit {
		t.Errorf("explicit folder: %+v", c)
	}
	c = candidates(Options{}, getenv, glob)
	if len(c) != 1 || c[0].path != "/env/libcupti.so.13" || c[0].nvperfDir != "/env" || !c[0].explicit {
		t.Errorf("environment: %+v", c)
	}
}

func TestFormatUUID(t *testing.T) {
	b := [16]byte{0xf0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	if got, want := FormatUUID(b), "GPU-f0010203-0405-0607-0809-0a0b0c0d0e0f"; got != want {
		t.Errorf("FormatUUID = %s, want %s", got, want)
	}
}
