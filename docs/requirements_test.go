// Package docs_test checks the requirement IDs the repository cites against
// docs/requirements.md, so that every "SPEC C4" in a comment or test points at a
// requirement a reader of the repository can look up.
//
// # What counts as a citation
//
// A requirement ID is a letter A–E and a number 1–11 without a leading zero,
// standing alone as a word: `\b[A-E](1[01]|[1-9])\b`. Where it appears decides
// whether it is a citation:
//
//   - Go comments (// and /* */, found with go/scanner, so identifiers and code
//     never count): every ID. The repository cites in many shapes, "SPEC A3",
//     "SPEC C2, C4", "(A7)", "SPEC D1/D4", "the C2 search", "(SPEC A1–A9,
//     B1, B4, B5)" over two lines, and all of them are comments.
//   - Go string literals: only the IDs after the word SPEC in the same literal
//     ("(SPEC A3)" in a t.Fatalf message). Other strings are data: LoCoMo
//     dialogue ids, test corpora.
//   - Markdown: every ID in prose, that is outside fenced code blocks and inline
//     code spans.
//
// Everywhere, an ID directly followed by ':' and a digit or '%' (LoCoMo dialogue
// ids such as D1:3 and their format strings), or by '.' or '-' and a digit (a
// version or model number), is not a citation. Longer tokens never match: "D43",
// "0xA1", "E2E", "TestDefaultsMatchSpecB1".
//
// A range between two IDs of one letter, written with "–", "—", "-", "…" or
// "..", cites every ID in between ("SPEC C4–C8" is C4, C5, C6, C7, C8); a range
// across letters cites its two ends.
//
// # What counts as defined
//
// An ID is defined when a table row of docs/requirements.md has it as its first
// cell. The file itself is not scanned for citations.
package docs_test

import (
	"bufio"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const requirementsFile = "requirements.md"

var (
	// idRe finds candidate IDs; citations filters them.
	idRe = regexp.MustCompile(`\b([A-E])(1[01]|[1-9])\b`)
	// wellFormedRe is a whole, well-formed ID.
	wellFormedRe = regexp.MustCompile(`^[A-E](1[01]|[1-9])$`)
	// rowIDRe is the first cell of a table row that looks like an ID, well formed
	// or not (so that "A12" or "C03" is reported rather than silently ignored).
	rowIDRe = regexp.MustCompile(`^\|\s*([A-Z][0-9]+)\s*\|`)
	// rangeSepRe is what may stand between the two ends of a range.
	rangeSepRe = regexp.MustCompile(`^\s*(–|—|-|…|\.\.\.?)\s*$`)
	// inlineCodeRe is a Markdown code span on one line.
	inlineCodeRe = regexp.MustCompile("`[^`]*`")
)

// citation is one cited ID and where.
type citation struct {
	id   string
	file string
	line int
}

// citations returns the IDs cited in text by the rules of the package doc;
// line is text's first line in its file.
func citations(text, file string, line int) []citation {
	type hit struct {
		letter     byte
		num        int
		start, end int
	}
	var hits []hit
	for _, m := range idRe.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[0], m[1]
		if next := text[end:]; len(next) >= 2 {
			switch next[0] {
			case ':':
				if isDigit(next[1]) || next[1] == '%' {
					continue
				}
			case '.', '-':
				if isDigit(next[1]) {
					continue
				}
			}
		}
		n, _ := strconv.Atoi(text[m[4]:m[5]])
		hits = append(hits, hit{letter: text[m[2]], num: n, start: start, end: end})
	}
	at := func(h hit) int { return line + strings.Count(text[:h.start], "\n") }
	var out []citation
	for i, h := range hits {
		from := h.num
		if i > 0 {
			prev := hits[i-1]
			if prev.letter == h.letter && prev.num < h.num && rangeSepRe.MatchString(text[prev.end:h.start]) {
				from = prev.num + 1 // the IDs inside the range, then its end
			}
		}
		for n := from; n <= h.num; n++ {
			out = append(out, citation{id: fmt.Sprintf("%c%d", h.letter, n), file: file, line: at(h)})
		}
	}
	return out
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// goCitations applies the Go rules: every ID in comments, IDs after SPEC in
// string literals. Consecutive line comments are one text, so that a range or
// list broken over two lines reads as written.
func goCitations(t *testing.T, path, rel string) []citation {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	file := fset.AddFile(rel, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments) // syntax errors are not this test's business
	var (
		out       []citation
		block     strings.Builder
		blockLine int
		lastLine  int
	)
	flush := func() {
		if block.Len() > 0 {
			out = append(out, citations(block.String(), rel, blockLine)...)
			block.Reset()
		}
	}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		line := fset.Position(pos).Line
		switch tok {
		case token.COMMENT:
			if block.Len() > 0 && (line != lastLine+1 || !strings.HasPrefix(lit, "//")) {
				flush()
			}
			if block.Len() == 0 {
				blockLine = line
			} else {
				block.WriteByte('\n')
			}
			block.WriteString(lit)
			lastLine = line + strings.Count(lit, "\n")
		case token.STRING:
			flush()
			if i := strings.Index(lit, "SPEC"); i >= 0 {
				out = append(out, citations(lit[i:], rel, line+strings.Count(lit[:i], "\n"))...)
			}
		default:
			flush()
		}
	}
	flush()
	return out
}

// markdownCitations applies the Markdown rule: every ID outside fenced code
// blocks and inline code spans.
func markdownCitations(t *testing.T, path, rel string) []citation {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out   []citation
		fence string
		n     int
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		out = append(out, citations(inlineCodeRe.ReplaceAllString(line, " "), rel, n)...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// repoCitations walks the repository above this directory.
func repoCitations(t *testing.T) []citation {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var out []citation
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case rel == "docs/"+requirementsFile:
		case strings.HasSuffix(rel, ".go"):
			out = append(out, goCitations(t, path, rel)...)
		case strings.HasSuffix(rel, ".md"):
			out = append(out, markdownCitations(t, path, rel)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// definedIDs reads the first cells of requirements.md's table rows, with the
// line of each.
func definedIDs(t *testing.T) map[string][]int {
	data, err := os.ReadFile(requirementsFile)
	if err != nil {
		t.Fatal(err)
	}
	ids := make(map[string][]int)
	for i, line := range strings.Split(string(data), "\n") {
		if m := rowIDRe.FindStringSubmatch(line); m != nil {
			ids[m[1]] = append(ids[m[1]], i+1)
		}
	}
	return ids
}

func TestEveryCitedRequirementIsDefined(t *testing.T) {
	defined := definedIDs(t)
	cited := repoCitations(t)
	if len(cited) == 0 {
		t.Fatal("no requirement citations found: the walk or the rules are broken")
	}
	where := make(map[string][]string)
	for _, c := range cited {
		where[c.id] = append(where[c.id], fmt.Sprintf("%s:%d", c.file, c.line))
	}
	ids := make([]string, 0, len(where))
	for id := range where {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return idLess(ids[i], ids[j]) })
	var missing []string
	for _, id := range ids {
		if _, ok := defined[id]; !ok {
			missing = append(missing, fmt.Sprintf("%s, cited at %s", id, strings.Join(where[id], ", ")))
		}
	}
	if len(missing) > 0 {
		t.Errorf("requirement IDs cited but not defined in docs/%s:\n  %s", requirementsFile, strings.Join(missing, "\n  "))
	}
	t.Logf("%d citations of %d distinct requirement IDs: %s", len(cited), len(ids), strings.Join(ids, " "))
}

func TestDefinedRequirementsAreWellFormed(t *testing.T) {
	defined := definedIDs(t)
	if len(defined) == 0 {
		t.Fatalf("docs/%s defines no requirement", requirementsFile)
	}
	byLetter := make(map[byte][]int)
	for id, lines := range defined {
		if !wellFormedRe.MatchString(id) {
			t.Errorf("docs/%s:%d: %q is not a requirement ID (a letter A–E and 1–11)", requirementsFile, lines[0], id)
			continue
		}
		if len(lines) > 1 {
			t.Errorf("docs/%s: %s is defined on lines %v; once is enough", requirementsFile, id, lines)
		}
		n, _ := strconv.Atoi(id[1:])
		byLetter[id[0]] = append(byLetter[id[0]], n)
	}
	for letter, nums := range byLetter {
		slices.Sort(nums)
		for i, n := range nums {
			if n != i+1 {
				t.Errorf("docs/%s: the %c requirements are %v; they should be numbered 1, 2, … without gaps", requirementsFile, letter, nums)
				break
			}
		}
	}
}

// TestCitationRules pins the rules of the package doc on the shapes the
// repository uses.
func TestCitationRules(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"// SPEC A3: nothing said", []string{"A3"}},
		{"// (SPEC C2, C4)", []string{"C2", "C4"}},
		{"// Property (C4, C5): whatever", []string{"C4", "C5"}},
		{"// SPEC D1/D4 and the C2 search", []string{"D1", "D4", "C2"}},
		{"// tidy (SPEC C4–C8, D4)", []string{"C4", "C5", "C6", "C7", "C8", "D4"}},
		{"// (SPEC A1–A9,\n// B1, B4)", []string{"A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A9", "B1", "B4"}},
		{"tracked by ID (A1…E8)", []string{"A1", "E8"}},
		{"// SPEC A10 and A11", []string{"A10", "A11"}},
		{`{"dia_id":"D1:3"} D1:%d D43 0xA1 E2E TestDefaultsMatchSpecB1 A12 A0 F1 E5-2680 B1.5`, nil},
	} {
		var got []string
		for _, c := range citations(tc.text, "x", 1) {
			got = append(got, c.id)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("citations(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

// idLess orders IDs by letter, then number.
func idLess(a, b string) bool {
	if a[0] != b[0] {
		return a[0] < b[0]
	}
	na, _ := strconv.Atoi(a[1:])
	nb, _ := strconv.Atoi(b[1:])
	return na < nb
}
