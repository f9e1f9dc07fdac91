package markdown

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestCountLinesAndHead(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		lines int
		head2 string
	}{
		{"empty doc", "", 0, ""},
		{"one line without newline", "a", 1, "a"},
		{"one line with newline", "a\n", 1, "a\n"},
		{"trailing blank line", "a\n\n", 2, "a\n\n"},
		{"single newline", "\n", 1, "\n"},
		{"three lines", "a\nb\nc", 3, "a\nb\n"},
		{"CRLF", "a\r\nb\r\nc\r\n", 3, "a\r\nb\r\n"},
		{"lone CR is not a line end", "a\rb\nc", 2, "a\rb\nc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CountLines(tt.doc); got != tt.lines {
				t.Errorf("CountLines(%q) = %d, want %d", tt.doc, got, tt.lines)
			}
			if got := Head(tt.doc, 2); got != tt.head2 {
				t.Errorf("Head(%q, 2) = %q, want %q", tt.doc, got, tt.head2)
			}
			if got := Head(tt.doc, 0); got != "" {
				t.Errorf("Head(%q, 0) = %q, want empty", tt.doc, got)
			}
			if got := Head(tt.doc, -1); got != "" {
				t.Errorf("Head(%q, -1) = %q, want empty", tt.doc, got)
			}
			if got := len(splitLines(tt.doc)); got != tt.lines {
				t.Errorf("splitLines(%q) has %d lines, CountLines says %d", tt.doc, got, tt.lines)
			}
		})
	}
}

// genDoc draws text rich in line endings: "\n", "\r\n", lone "\r" and blank lines.
func genDoc(t *rapid.T) string {
	parts := rapid.SliceOf(rapid.SampledFrom([]string{"\n", "\r\n", "\r", "", "x", "line", " ", "ü", "---", "### [2025-01-01 10:00] general"})).Draw(t, "parts")
	return strings.Join(parts, "")
}

func TestPropertyHeadReturnsFirstNLines(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		doc := genDoc(t)
		n := rapid.IntRange(-2, 30).Draw(t, "n")
		h := Head(doc, n)
		if want := min(max(n, 0), CountLines(doc)); CountLines(h) != want {
			t.Fatalf("Head(%q, %d) = %q has %d lines, want %d", doc, n, h, CountLines(h), want)
		}
		if !strings.HasPrefix(doc, h) {
			t.Fatalf("Head(%q, %d) = %q is not a prefix", doc, n, h)
		}
	})
}
