package extract_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/pkg/markdown"
)

// Chinese and German file structures become file_pattern entries, with types and
// row counts written in English.
func TestRulesFileFactsChineseGerman(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"订单表 orders_2025.csv 的列：订单号、客户、下单日期和金额。约 1.2 万行。", "orders_2025.csv: columns 订单号, 客户, 下单日期, 金额; about 12000 rows"},
		{"客户文件的字段：客户编号是整数，注册时间是日期，备注是文本。", "客户文件: columns 客户编号 (int), 注册时间 (date), 备注 (text)"},
		{"财务工作簿有四个工作表：一季度、二季度、三季度、四季度。", "财务工作簿: sheets 一季度, 二季度, 三季度, 四季度"},
		{"Die Tabelle bestellungen.xlsx hat die Spalten Kunde, Bestelldatum, Summe und Status. Rund 12.500 Zeilen.", "bestellungen.xlsx: columns Kunde, Bestelldatum, Summe, Status; about 12500 rows"},
		{"Die Mappe budget.xlsx hat die Tabellenblätter Januar, Februar und März.", "budget.xlsx: sheets Januar, Februar, März"},
		{"In der Kundendatei ist die Spalte plz ein Text und die Spalte seit ein Datum.", "Kundendatei: columns plz (text), seit (date)"},
	} {
		got := ofCategory(rulesExtract(t, conv("user", tc.text)), markdown.CategoryFilePattern)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.text, got, tc.want)
		}
	}
	// The first rows, deleted rows and a sheet named as such are no facts of a file.
	for _, text := range []string{"请看前 10 行。", "我删除了 3 行。", "Zeig mir die ersten 10 Zeilen."} {
		if got := ofCategory(rulesExtract(t, conv("user", text)), markdown.CategoryFilePattern); len(got) != 0 {
			t.Errorf("%q: got %q, want nothing", text, got)
		}
	}
}

// Chinese and German preferences: imperatives about answers, habits with a topic.
func TestRulesPreferencesChineseGerman(t *testing.T) {
	for _, text := range []string{
		"今后表格里的百分比保留一位小数。",
		"我习惯用柱状图比较各月数据。",
		"报告的标题统一用黑体。",
		"不要在回答里加表情。",
		"Ich bevorzuge kurze Antworten ohne Einleitung.",
		"Zahlen bitte immer mit zwei Nachkommastellen.",
		"Ich nutze meistens Excel statt Google Sheets.",
		"Schreib mir bitte auf Deutsch.",
	} {
		if got := ofCategory(rulesExtract(t, conv("user", text)), markdown.CategoryUserPref); len(got) != 1 {
			t.Errorf("%q: got %q, want one preference", text, got)
		}
	}
	for _, text := range []string{
		"它总是报错。",      // an error, not a habit
		"请帮我看一下这个文件。", // a request
		"你能用折线图吗？",    // a question
		"Das Diagramm ist fertig.",
		"Excel stürzt immer mit einem Fehler ab.",
	} {
		if got := ofCategory(rulesExtract(t, conv("user", text)), markdown.CategoryUserPref); len(got) != 0 {
			t.Errorf("%q: got %q, want none", text, got)
		}
	}
}

// An error, a fix in an assistant reply and a confirmation, over several turns
// and in any of the three languages, give one error_solution with the whole fix;
// a rejected suggestion is not the fix.
func TestRulesErrorFixConfirmationOverTurns(t *testing.T) {
	for _, tc := range []struct {
		name string
		conv []string
		fix  []string // in the entry
		not  []string // not in the entry
	}{
		{"en tool error, two-step fix", []string{
			"user", "Loading the report fails.",
			"tool", "Traceback (most recent call last):\n  File \"r.py\", line 3\nValueError: could not convert string to float: '1,234'",
			"assistant", "Sure! The numbers use a comma as thousands separator. Read them with pd.read_csv(path, thousands=',') and the column becomes numeric.",
			"user", "Perfect, that worked."},
			[]string{"thousands separator", "thousands=','", "becomes numeric"}, []string{"Sure"}},
		{"en rejected then fixed", []string{
			"user", "The pivot shows #REF! everywhere.",
			"assistant", "Rebuild the pivot table from scratch.",
			"user", "That didn't work either.",
			"assistant", "The source range was deleted. Point the pivot at Sales!A1:F900 again.",
			"user", "Works now, thanks."},
			[]string{"Sales!A1:F900", "source range was deleted"}, []string{"from scratch"}},
		{"zh", []string{
			"user", "打开导出的文件时报错：FileNotFoundError: report.xlsx",
			"assistant", "路径不对。文件在 output 目录下，用 open('output/report.xlsx') 打开。",
			"user", "这个方法不行。",
			"assistant", "那就用绝对路径：os.path.abspath('output/report.xlsx')。",
			"user", "成功了，谢谢。"},
			[]string{"abspath"}, []string{"open('output"}},
		{"de", []string{
			"tool", "PermissionError: [Errno 13] Permission denied: 'bericht.xlsx'",
			"assistant", "Die Datei ist noch in Excel geöffnet. Schließe sie und starte das Skript erneut.",
			"user", "Danke, das hat geklappt."},
			[]string{"noch in Excel geöffnet", "starte das Skript erneut"}, nil},
		{"de excel", []string{
			"user", "Meine Formel zeigt #WERT! in Spalte D.",
			"assistant", "In D stehen Zahlen als Text. Nutze =WERT(D2)*1.",
			"user", "Jetzt funktioniert es, danke."},
			[]string{"=WERT(D2)*1"}, nil},
	} {
		got := ofCategory(rulesExtract(t, conv(tc.conv...)), markdown.CategoryErrorSolution)
		if len(got) != 1 {
			t.Errorf("%s: got %q, want one entry", tc.name, got)
			continue
		}
		for _, w := range tc.fix {
			if !strings.Contains(got[0], w) {
				t.Errorf("%s: %q lacks %q", tc.name, got[0], w)
			}
		}
		if slices.ContainsFunc(tc.not, func(w string) bool { return strings.Contains(got[0], w) }) {
			t.Errorf("%s: %q has one of %q", tc.name, got[0], tc.not)
		}
	}
	// Unconfirmed or rejected: nothing.
	for _, c := range [][]string{
		{"user", "报错：KeyError: '金额'", "assistant", "把列名改成 amount。", "user", "还是不行。"},
		{"tool", "KeyError: 'Betrag'", "assistant", "Benenne die Spalte um.", "user", "Das funktioniert nicht."},
	} {
		if got := ofCategory(rulesExtract(t, conv(c...)), markdown.CategoryErrorSolution); len(got) != 0 {
			t.Errorf("%q: got %q, want none", c, got)
		}
	}
}
