package mapping

import (
	"slices"
	"testing"
)

func TestSuggest(t *testing.T) {
	known := []string{"dram__bytes_read", "dram__bytes_write", "dram__bytes", "sm__cycles_active", "sm__warps_active", "lts__t_sectors"}
	tests := []struct {
		name string
		n    int
		want []string
	}{
		{"dram__bytes_raed", 2, []string{"dram__bytes_read", "dram__bytes_write"}}, // distances 2 and 4; dram__bytes is 5
		{"dram__bytes_read", 1, []string{"dram__bytes_read"}},
		{"sm__cycle_active", 3, []string{"sm__cycles_active", "sm__warps_active"}},
		{"sm__warps_active", 0, nil},
		{"completely_unrelated_name", 3, nil},
		{"", 3, nil},
	}
	for _, tt := range tests {
		if got := Suggest(tt.name, known, tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("Suggest(%q, %d) = %q, want %q", tt.name, tt.n, got, tt.want)
		}
	}
}

func TestLevenshtein(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"same", "same", 0},
	}
	for _, tt := range tests {
		if got := levenshtein(tt.a, tt.b, 100); got != tt.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := levenshtein(tt.a, tt.b, 0); tt.want > 0 && got != 1 {
			t.Errorf("levenshtein(%q, %q, limit 0) = %d, want 1 (limit+1)", tt.a, tt.b, got)
		}
	}
}

// TestSuggestCatalog checks a realistic typo against the whole GH100 catalog.
func TestSuggestCatalog(t *testing.T) {
	var names []string
	for _, e := range loadCatalog(t) {
		names = append(names, e.name)
	}
	got := Suggest("sm__pipe_tensor_cycle_active", names, 3)
	if len(got) == 0 || got[0] != "sm__pipe_tensor_cycles_active" {
		t.Errorf("Suggest = %q", got)
	}
}
