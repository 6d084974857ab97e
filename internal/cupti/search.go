package cupti

import (
	"os"
	"path/filepath"
	"sort"
)

// Library file names.
const (
	cuptiSoname = "libcupti.so.13"
	cudaSoname  = "libcuda.so.1"
	// EnvLibrary names an explicit libcupti file or folder (after Options.LibraryPath).
	EnvLibrary = "CUPTI_EXPORTER_CUPTI_LIBRARY"
)

// candidate is one place libcupti may be loaded from.
type candidate struct {
	path      string // absolute file, or the bare soname for the loader's search
	nvperfDir string // folder to preload nvperf from before libcupti ("" = after, from where it loaded)
	explicit  bool   // the user named it: a failure is final
}

// searchDirs are the folders tried after the loader's path, in order. Globs are expanded and
// sorted newest-looking last-first (reverse lexical) so cuda-13.2 wins over cuda-13.0.
var searchDirs = []string{
	"/usr/local/cuda/extras/CUPTI/lib64",
	"/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/local/cuda-13*/targets/x86_64-linux/lib",
	"/usr/local/lib/python3*/dist-packages/nvidia/cu13/lib",
	"/usr/local/lib/python3*/site-packages/nvidia/cu13/lib",
	"/usr/lib/python3*/site-packages/nvidia/cu13/lib",
	"/usr/lib/python3/dist-packages/nvidia/cu13/lib",
}

// candidates lists where to look, in order. getenv and glob are parameters for tests.
func candidates(opts Options, getenv func(string) string, glob func(string) ([]string, error)) []candidate {
	explicit := opts.LibraryPath
	if explicit == "" {
		explicit = getenv(EnvLibrary)
	}
	if explicit != "" {
		file := explicit
		if st, err := os.Stat(explicit); err == nil && st.IsDir() {
			file = filepath.Join(explicit, cuptiSoname)
		}
		return []candidate{{path: file, nvperfDir: filepath.Dir(file), explicit: true}}
	}
	out := []candidate{{path: cuptiSoname}}
	dirs := append([]string(nil), searchDirs...)
	// Python environments: a virtualenv, then the user's site-packages.
	if v := getenv("VIRTUAL_ENV"); v != "" {
		dirs = append(dirs, filepath.Join(v, "lib/python3*/site-packages/nvidia/cu13/lib"))
	}
	if h := getenv("HOME"); h != "" {
		dirs = append(dirs, filepath.Join(h, ".local/lib/python3*/site-packages/nvidia/cu13/lib"))
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		matches, _ := glob(d)
		sort.Sort(sort.Reverse(sort.StringSlice(matches)))
		for _, m := range matches {
			f := filepath.Join(m, cuptiSoname)
			if seen[f] {
				continue
			}
			seen[f] = true
			out = append(out, candidate{path: f, nvperfDir: m})
		}
	}
	return out
}

// globExisting is filepath.Glob that also keeps literal folders only when they exist.
func globExisting(pattern string) ([]string, error) {
	m, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range m {
		if _, err := os.Stat(filepath.Join(d, cuptiSoname)); err == nil {
			out = append(out, d)
		}
	}
	return out, nil
}
