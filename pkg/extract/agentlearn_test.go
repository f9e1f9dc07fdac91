package extract_test

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/markdown"
)

// Issue 31: of what the rules extract, the impersonal error→fix pairs and
// procedures are lessons for the agent; entries that name or describe the
// user (a name given in the session, contact data, a file of theirs, a
// preference, a record number) never are.
func TestLessonsKeepImpersonalFixesOnly(t *testing.T) {
	session := conv(
		"user", "Hi, I'm Dana Whitfield.",
		"tool", "KeyError: 'Date'",
		"assistant", "Rename the column to Date.",
		"user", "That worked, thanks.",
	)
	names := extract.SessionNames(session, "u1")
	var fixes []string
	for _, e := range rulesExtract(t, session) {
		if extract.Lesson(e, names) {
			fixes = append(fixes, e.Content)
		}
	}
	if len(fixes) != 1 || !strings.Contains(fixes[0], "KeyError") || !strings.Contains(fixes[0], "Rename the column") {
		t.Fatalf("lessons %q: want the KeyError fix alone", fixes)
	}

	for _, tc := range []struct {
		e    extract.Extracted
		want bool
	}{
		{extract.Extracted{Category: markdown.CategoryErrorSolution, Content: "Error: #VALUE!. Fix: make the ranges the same size"}, true},
		{extract.Extracted{Category: markdown.CategoryGeneral, Content: "To reset a VPN token, run vpnctl reset --force, then sign in again"}, true},
		{extract.Extracted{Category: markdown.CategoryGeneral, Content: "First clear the export cache, then retry the March report"}, true},
		// Not a lesson: a fact about the user's world, a preference, a file.
		{extract.Extracted{Category: markdown.CategoryGeneral, Content: "Invoices are due on the 5th of each month"}, false},
		{extract.Extracted{Category: markdown.CategoryUserPref, Content: "Line charts with a dark theme"}, false},
		{extract.Extracted{Category: markdown.CategoryFilePattern, Content: "orders.csv: columns order_id, total"}, false},
		// Lessons in form, personal in content.
		{extract.Extracted{Category: markdown.CategoryErrorSolution, Content: "Error: Dana's login fails. Fix: reset the password"}, false},
		{extract.Extracted{Category: markdown.CategoryErrorSolution, Content: "Error: bounce from dana.w@example.com. Fix: use the billing address"}, false},
		{extract.Extracted{Category: markdown.CategoryErrorSolution, Content: "Error: SMS not delivered. Fix: resend to +1 555 014 2233"}, false},
		{extract.Extracted{Category: markdown.CategoryErrorSolution, Content: "Error: #REF! in sales_2024.xlsx. Fix: restore the deleted sheet"}, false},
		{extract.Extracted{Category: markdown.CategoryErrorSolution, Content: "Error: refund failed. Fix: refund order ORD-482913 by hand"}, false},
		{extract.Extracted{Category: markdown.CategoryErrorSolution, Content: "Error: timeout. Fix: she prefers a call back in the morning"}, false},
		{extract.Extracted{Category: markdown.CategoryGeneral, Content: "Use the EU endpoint for the customer's account"}, false},
	} {
		if got := extract.Lesson(tc.e, names); got != tc.want {
			t.Errorf("Lesson(%q) = %v, want %v", tc.e.Content, got, tc.want)
		}
	}
}

// Property: a lesson with a personal datum put anywhere in it (a name given
// in the session, an e-mail address, a phone number, a record number) is
// never promoted.
func TestLessonNeverHoldsPersonalData(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		first := rapid.SampledFrom([]string{"Dana", "Ravi", "Mei", "Jonas", "Amara"}).Draw(t, "first")
		names := extract.SessionNames(conv("user", "My name is "+first+"."), "u7")
		datum := rapid.SampledFrom([]string{
			first,
			strings.ToLower(first) + "@" + rapid.StringMatching(`[a-z]{3,8}`).Draw(t, "domain") + ".com",
			fmt.Sprintf("+%d %03d %04d", rapid.IntRange(1, 99).Draw(t, "cc"), rapid.IntRange(0, 999).Draw(t, "area"), rapid.IntRange(0, 9999).Draw(t, "line")),
			rapid.StringMatching(`[A-Z]{2,4}-[0-9]{5,8}`).Draw(t, "record"),
		}).Draw(t, "datum")
		words := strings.Fields("Error: the export failed. Fix: run the export again with the patched template")
		at := rapid.IntRange(0, len(words)).Draw(t, "at")
		content := strings.Join(append(words[:at:at], append([]string{datum}, words[at:]...)...), " ")
		if extract.Lesson(extract.Extracted{Category: markdown.CategoryErrorSolution, Content: content}, names) {
			t.Fatalf("%q promoted", content)
		}
	})
}
