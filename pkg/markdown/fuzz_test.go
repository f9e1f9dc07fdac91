package markdown

import "testing"

// FuzzParseEntries checks that any text parses without panicking and that every entry
// it yields is a fixed point of FormatEntry and ParseEntries. Seeds are in
// testdata/fuzz/FuzzParseEntries.
func FuzzParseEntries(f *testing.F) {
	f.Fuzz(func(t *testing.T, doc string) {
		entries, errs := ParseEntries(doc)
		for _, e := range errs {
			if e.Line < 1 || e.Line > CountLines(doc) {
				t.Fatalf("error %v points outside the %d-line document", e, CountLines(doc))
			}
		}
		for _, e := range entries {
			again, errs := ParseEntries(FormatEntry(e))
			if len(errs) != 0 || !sameEntries(again, []Entry{e}) {
				t.Fatalf("entry %+v re-parsed as %+v, %v", e, again, errs)
			}
		}
	})
}
