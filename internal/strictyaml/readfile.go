package strictyaml

import (
	"fmt"
	"io"
	"os"
	"strconv"
)

// ReadFile reads a file of at most limit bytes, and no more than limit+1 bytes of a larger
// one, which is an error naming its size, the limit and what the file is (what: "a
// configuration file"). The YAML decoder holds several times a file's size (a 200 MB
// configuration took 1.43 GB), and the files the exporter reads are a few KiB.
func ReadFile(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		size := "more"
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = strconv.FormatInt(st.Size(), 10)
		}
		return nil, fmt.Errorf("%s: %s bytes, more than the %d %s may have", path, size, limit, what)
	}
	return data, nil
}
