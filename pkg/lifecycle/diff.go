package lifecycle

import "strings"

// maxDiffCells bounds the line diff's table; past it the diff is the whole old
// file removed and the new one added.
const maxDiffCells = 4_000_000

// Diff is a line diff of a and b: unchanged lines start with "  ", removed ones
// with "- ", added ones with "+ " (longest common subsequence of lines).
func Diff(a, b string) string {
	x, y := lines(a), lines(b)
	var out strings.Builder
	if len(x)*len(y) > maxDiffCells {
		for _, l := range x {
			out.WriteString("- " + l + "\n")
		}
		for _, l := range y {
			out.WriteString("+ " + l + "\n")
		}
		return out.String()
	}
	// lcs[i][j]: the LCS length of x[i:] and y[j:].
	lcs := make([][]int32, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out.WriteString("  " + x[i] + "\n")
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+ " + y[j] + "\n")
			j++
		default:
			out.WriteString("- " + x[i] + "\n")
			i++
		}
	}
	return out.String()
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
