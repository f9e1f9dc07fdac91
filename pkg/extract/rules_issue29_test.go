package extract_test

import (
	"slices"
	"strings"
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

// An assistant's fix the user confirms worked, in any of the usual words, is
// kept as the solution of the error, not only the error (issue 29 item 7).
func TestRulesConfirmedFixIsTheSolution(t *testing.T) {
	for _, tc := range []struct{ err, fix, confirm, wantFix string }{
		{"KeyError: 'Date'", "Rename the column: df.rename(columns={'date': 'Date'}).", "Perfect, that did it.", "Rename the column"},
		{"ModuleNotFoundError: No module named 'yaml'", "Install it with pip install pyyaml.", "Yep, runs fine now.", "pip install pyyaml"},
		{"TypeError: unsupported operand type(s) for +: 'int' and 'str'", "Cast the column first: df['qty'].astype(int).", "Nice, no more errors.", "astype(int)"},
		{"Error: connection refused on port 5432", "Start the database with docker compose up -d db.", "Fixed!", "docker compose up -d db"},
		{"Fehler: Datei nicht gefunden", "Gib den vollen Pfad an: C:/daten/umsatz.xlsx.", "Danke, läuft.", "C:/daten/umsatz.xlsx"},
		{"报错：UnicodeDecodeError", "读取时加上 encoding='gbk'。", "没有报错了，谢谢！", "encoding='gbk'"},
		{"エラー: KeyError 'price'", "列名を 'Price' に変えてください。", "直りました！", "'Price'"},
		{"에러: KeyError 'price'", "열 이름을 'Price'로 바꿔 보세요.", "해결됐어요, 고마워요.", "'Price'"},
	} {
		got := ofCategory(rulesExtract(t, conv("user", "Running the monthly script.", "tool", tc.err, "assistant", tc.fix, "user", tc.confirm)), markdown.CategoryErrorSolution)
		if len(got) != 1 || !strings.Contains(got[0], "Fix: ") || !strings.Contains(got[0], tc.wantFix) {
			t.Errorf("%q after %q: got %q, want one entry whose fix holds %q", tc.confirm, tc.fix, got, tc.wantFix)
		}
	}
	// A confirmation that says the error is back, or a thanks for nothing in
	// particular, solves nothing.
	for _, confirm := range []string{"Still getting the same error.", "No more ideas? It fails again.", "还是报错。", "Thanks."} {
		got := ofCategory(rulesExtract(t, conv("tool", "KeyError: 'Date'", "assistant", "Rename the column to Date.", "user", confirm)), markdown.CategoryErrorSolution)
		if len(got) != 0 {
			t.Errorf("%q kept %q as solved", confirm, got)
		}
	}
}
