package recording

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader checks that no input makes the reader panic or loop, and that every failure
// is a located format error (or a clean end).
func FuzzReader(f *testing.F) {
	f.Add(sampleRecording(f, true))
	f.Add(sampleRecording(f, false))
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		rd, err := NewReader(bytes.NewReader(data))
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("unlocated error: %v", err)
			}
			return
		}
		for i := 0; ; i++ {
			_, err := rd.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				var fe *FormatError
				if !errors.As(err, &fe) {
					t.Fatalf("unlocated error: %v", err)
				}
				return
			}
			if i > len(data) {
				t.Fatal("more events than bytes")
			}
		}
	})
}
