package extract_test

import (
	"slices"
	"testing"

	"github.com/agentmem/agentmem/pkg/markdown"
)

// The alternative a user names when turning down the assistant's suggestion is
// the preference; the suggestion is not, and a rejection that names nothing, or
// a "no" to no suggestion, keeps nothing (issue 29 item 8).
func TestRulesRejectedSuggestionKeepsTheAlternative(t *testing.T) {
	const why = " (preferred to the assistant's suggestion)"
	for _, tc := range []struct{ assistant, user, want string }{
		{"Shall I make it a pie chart?", "No, a stacked bar chart please.", "A stacked bar chart please" + why},
		{"How about using pandas for this?", "Nope, Polars instead.", "Polars instead" + why},
		{"Ich würde die Werte auf zwei Nachkommastellen runden.", "Nein, lieber ganze Euro-Beträge.", "Lieber ganze Euro-Beträge" + why},
		{"要不要做成饼图？", "不，用折线图。", "用折线图" + why},
		{"円グラフにしましょうか？", "いいえ、棒グラフでお願いします。", "棒グラフでお願いします" + why},
		{"막대 그래프로 할까요?", "아니요, 꺾은선 그래프로 해 주세요.", "꺾은선 그래프로 해 주세요" + why},
	} {
		got := ofCategory(rulesExtract(t, conv("user", "Chart the monthly revenue.", "assistant", tc.assistant, "user", tc.user)), markdown.CategoryUserPref)
		if !slices.Equal(got, []string{tc.want}) {
			t.Errorf("%q / %q:\n got %q\nwant %q", tc.assistant, tc.user, got, []string{tc.want})
		}
	}
	for _, tc := range []struct{ assistant, user string }{
		{"Try adding encoding='latin-1'. Does that help?", "No, that didn't work."},
		{"Would you like me to add a trend line?", "No thanks, that's fine."},
		{"Shall I sort it by date?", "No, why would you?"},
		{"要不要做成饼图？", "不用了，谢谢。"},
		{"Here is the chart.", "No, the revenue is in column C."}, // nothing was proposed
	} {
		if got := ofCategory(rulesExtract(t, conv("user", "Chart the monthly revenue.", "assistant", tc.assistant, "user", tc.user)), markdown.CategoryUserPref); len(got) != 0 {
			t.Errorf("%q / %q kept %q as a preference", tc.assistant, tc.user, got)
		}
	}
}
