package processor

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/records"
)

// Rules beyond English first-person statements (doc.go, "Other languages and
// impersonal statements"). They read the folded text (bm25.Fold: NFKC, case
// folded), so full-width forms and case do not matter.

// rememberJaKo: the Japanese and Korean verbs of a request to remember, with
// their polite and casual endings.
const rememberJaKo = `覚えて(?:おいて|おいてね|おいてください|ください|てね|ね)?|覚えといて|忘れないで(?:ください|ね)?|メモして(?:おいて|ください)?|기억해\s*(?:줘|주세요|둬|두세요|줄래|요)?|기억하세요|잊지\s*(?:마|마세요|말아\s*줘|말아\s*주세요)`

var (
	// rememberOtherRes: an explicit request to remember in Chinese, German,
	// Japanese or Korean, the body in group 1. Chinese and German open with the
	// request ("请记住：…", "Merk dir bitte: …", "Vergiss nicht, dass …"); Japanese
	// and Korean put the verb last ("娘の名前はさくらです。覚えておいてね",
	// "내 딸 이름은 지우야. 기억해 줘"), or first as a command ("覚えておいて：…",
	// "기억해 줘: …"), and Chinese may close with it ("…，请记住", "…，别忘了"; not "我记住了",
	// which says the speaker knows it).
	rememberOtherRes = []*regexp.Regexp{
		regexp.MustCompile(`^\s*(?:(?:请|麻烦)?(?:你)?(?:记住|记得|记下|别忘了|不要忘记|不要忘了)|(?:bitte\s+)?(?:merk(?:e)?\s+dir|vergiss\s+nicht|denk(?:e)?\s+daran|notier(?:e)?\s+dir)(?:\s+bitte)?|` + rememberJaKo + `)[\s:：,，、!！。\-–]*(?:dass\s+)?(.+)$`),
		regexp.MustCompile(`^\s*(.+?)[\s,，、。.!！]*(?:ということ|ってこと|こと)?(?:を|は|って)?(?:ちゃんと|しっかり)?(?:` + rememberJaKo + `|请(?:你)?(?:记住|记下)|(?:记住|记得)(?:哦|啊)|别忘了)[\s。.!！~～ね]*$`),
	}
	// firstPersonOther are first-person words of German, and Chinese first-person
	// characters (found as substrings: Chinese has no spaces).
	firstPersonDE = setOf("ich", "mich", "mir", "mein", "meine", "meinen", "meinem", "meiner", "meines",
		"wir", "uns", "unser", "unsere", "unseren", "unserem", "unserer")
	// requestStartOther: a request to the assistant, not a fact.
	requestStartOther = regexp.MustCompile(`^(?:帮我|帮忙|请帮|请你|给我|你能|你可以|能不能|麻烦你|看一下|bitte\s|kannst\s|könntest\s|lies\s|fasse\s|zeig|mach\s|schreib|erstell|berechne|prüf|öffne|schick|übersetz)`)
	// habitOther marks a habit or standing instruction: always, never, from now
	// on, by default, usually, prefer.
	habitOther = regexp.MustCompile(`总是|一律|以后|永远|始终|默认|习惯|通常|偏好|喜欢|尽量|不要用|别用|\b(?:immer|nie|niemals|künftig|standardmäßig|normalerweise|grundsätzlich|bevorzuge|bevorzugt|lieber|ab jetzt)\b`)
	habitEN    = setOf("always", "never", "usually", "normally", "typically", "default", "prefer", "rather", "henceforth")
	// questionOther: a question in Chinese or German without a question mark.
	questionOther = regexp.MustCompile(`[吗呢]\s*$|^(?:什么|哪|谁|怎么|为什么|几|多少)|^(?:was|wie|wann|wo|wer|welche[rsmn]?|warum|wieso)\b`)
	// chitChatOther: greetings, thanks and fillers in Chinese and German.
	chitChatOther = regexp.MustCompile(`^(?:[\s,，.。!！~～]*(?:你好|您好|谢谢|多谢|好的|没事了?|哈哈+|嗯|再见|早上好|晚上好|不用了|不客气|hallo|danke|tschüss|bis später|bis bald|passt schon|alles klar|gut|super|ok|ja|nein|guten morgen|guten tag|moin|servus)[\s,，.。!！~～]*)+$`)
)

// imperativeVerbs open a request to the assistant in English ("Sum revenue per
// region", "Make me the summary"); with a habit word ("Show all times in CET by
// default") the sentence is a standing preference instead.
var imperativeVerbs = setOf("sum", "plot", "make", "write", "translate", "summarise", "summarize", "load",
	"read", "start", "show", "give", "tell", "help", "check", "run", "create", "draw", "compute",
	"calculate", "list", "find", "open", "send", "schedule", "move", "fix", "explain", "convert",
	"export", "import", "generate", "draft", "add", "remove", "delete", "update", "merge", "join",
	"sort", "filter", "count", "compare", "look", "continue", "go", "let's", "lets", "book", "remind",
	"email", "call", "ask", "search", "fetch", "analyse", "analyze", "build", "prepare", "redo", "try")

// anchorWords make an impersonal statement about the user's work worth keeping:
// files, data, tools, environment, dates and people's roles (English, German
// stems, Chinese words; matched on folded words, or as substrings for Chinese).
var anchorWords = setOf("file", "files", "table", "tables", "column", "columns", "sheet", "sheets",
	"workbook", "spreadsheet", "database", "db", "server", "schema", "dataset", "report", "reports",
	"project", "team", "deadline", "due", "fiscal", "meeting", "sync", "manager", "boss", "version",
	"repo", "repository", "branch", "pipeline", "dashboard", "budget", "rows", "fields", "format",
	"uses", "runs", "python", "excel", "answers", "charts", "decimals", "currency", "timezone")

var anchorSubstrings = []string{"文件", "表", "列", "字段", "报告", "报表", "截止", "财年", "经理", "服务器", "项目",
	"会议", "数据", "版本", "格式", "小数", "图", "回答", "日期",
	"datei", "tabelle", "spalte", "blatt", "blätter", "arbeitsmappe", "bericht", "frist", "geschäftsjahr",
	"projekt", "server", "meeting", "version", "format", "diagramm", "antwort", "datum", "zeilen"}

// rememberOtherWords: one of them is in every text rememberOtherRes match (each
// alternative of their verbs holds one), so a text without any is not tried:
// the backtracking of the patterns was about 4% of ingest's CPU per
// observation, on texts that are nearly all in other words.
var rememberOtherWords = []string{"记住", "记得", "记下", "别忘了", "不要忘", "merk", "vergiss", "denk", "notier",
	"覚え", "忘れないで", "メモして", "기억", "잊지"}

// rememberOther returns the body of a Chinese, German, Japanese or Korean
// remember request.
func rememberOther(text string) (string, bool) {
	text = strings.TrimSpace(text)
	folded := bm25.Fold(text)
	if !slices.ContainsFunc(rememberOtherWords, func(w string) bool { return strings.Contains(folded, w) }) {
		return "", false
	}
	return rememberOtherBody(text, folded)
}

// rememberOtherBody is rememberOther of the trimmed text and its folded form,
// without the word filter.
func rememberOtherBody(text, folded string) (string, bool) {
	for _, re := range rememberOtherRes {
		m := re.FindStringSubmatchIndex(folded)
		if m == nil {
			continue
		}
		// The body is cut from the original text, so its case survives folding.
		// Folding keeps the rune count of nearly all text, but not its bytes:
		// the body is found by rune offsets, or taken folded when the counts
		// differ (half-width kana with a voicing mark fold to one rune).
		body := folded[m[2]:m[3]]
		if orig := []rune(text); len(orig) == utf8.RuneCountInString(folded) {
			from := utf8.RuneCountInString(folded[:m[2]])
			body = string(orig[from : from+utf8.RuneCountInString(body)])
		}
		body = strings.TrimSpace(body)
		return body, utf8.RuneCountInString(body) >= 4
	}
	return "", false
}

// cjkRunes counts the CJK runes of s: Chinese has no words to count.
func cjkRunes(s string) int {
	n := 0
	for _, r := range s {
		if bm25.IsCJK(r) {
			n++
		}
	}
	return n
}

// hasFirstPersonOther: a German first-person word or a Chinese 我.
func hasFirstPersonOther(folded string, ws []string) bool {
	if strings.Contains(folded, "我") {
		return true
	}
	for _, w := range ws {
		if firstPersonDE[w] {
			return true
		}
	}
	return false
}

// hasAnchor reports whether a sentence names something of the user's work
// specifically: a digit, an identifier or file name (a word with _ . / @ : or -
// inside), a capitalised word after the first (a name: "Poetry", "Bluebird"), or
// an anchor word.
func hasAnchor(text, folded string, ws []string) bool {
	for i, f := range strings.Fields(text) {
		f = strings.Trim(f, `"'“”‘’()[],;:.!?，。：；！？`)
		if f == "" {
			continue
		}
		if strings.ContainsFunc(f, unicode.IsDigit) {
			return true
		}
		if strings.ContainsAny(strings.Trim(f, "_./@:-"), "_./@:") {
			return true
		}
		if i > 0 && unicode.IsUpper([]rune(f)[0]) {
			return true
		}
	}
	for _, w := range ws {
		if anchorWords[w] {
			return true
		}
	}
	for _, s := range anchorSubstrings {
		if strings.Contains(folded, s) {
			return true
		}
	}
	return false
}

// isStandingStatement decides a human sentence the English first-person rule
// did not keep: a remember-free statement in any language that is not a
// question, greeting or request, and is either in the first person (German,
// Chinese), a habit or standing instruction ("Always format dates as ...",
// "金额总是保留两位小数"), or an impersonal statement with an anchor ("The
// staging DB is orders_v2", "季度报告的截止日期是三月二十八日").
func isStandingStatement(text string, ws []string) bool {
	folded := bm25.Fold(strings.TrimSpace(text))
	if folded == "" || questionOther.MatchString(folded) || chitChatOther.MatchString(folded) {
		return false
	}
	cjk := cjkRunes(folded)
	if contentWords(ws) < minContentWords && cjk < 4 {
		return false
	}
	if len(ws) > 0 && (ws[0] == "you" || ws[0] == "your" || ws[0] == "you're") {
		return false // said to the assistant, about the assistant
	}
	habit := habitOther.MatchString(folded)
	for _, w := range ws {
		if habitEN[w] {
			habit = true
		}
	}
	if containsRun(ws, []string{"from", "now", "on"}) || containsRun(ws, []string{"by", "default"}) || containsRun(ws, []string{"every", "time"}) {
		habit = true
	}
	request := requestStartOther.MatchString(folded) || (len(ws) > 0 && (imperativeVerbs[ws[0]] || ws[0] == "please"))
	for _, m := range requestMarkers {
		if containsRun(ws, m) {
			request = true
		}
	}
	switch {
	case habit:
		return true
	case request:
		return false
	case hasFirstPersonOther(folded, ws):
		return true
	}
	return hasAnchor(text, folded, ws)
}

var (
	// describesFileRe: tool output about a file's structure (a file name with a
	// data extension, a column list, a row count, pandas' shape or RangeIndex).
	describesFileRe = regexp.MustCompile(`(?i)\b[\w\-]+\.(?:csv|tsv|xlsx|xls|json|parquet)\b|\bcolumns?\s*[:=]|\b\d[\d,_.]*\s*(?:rows|records|entries)\b|\bshape\s*[:=]|\bRangeIndex\b`)
	// confirmRe: the user says a fix worked (English, Chinese, German), without a
	// negation.
	confirmRe  = regexp.MustCompile(`(?i)\b(?:that|it|this|which|the fix)\s+(?:worked|works|did it|did the trick|fixed it|solved it)\b|\b(?:works|working)\s+(?:now|fine|perfectly)\b|\bit'?s\s+working\b|\b(?:problem|issue|error)\s+(?:is\s+)?(?:solved|fixed|resolved|gone)\b|可以了|好了|成功了|解决了|搞定|能运行了|可以运行了|管用|\b(?:hat\s+(?:funktioniert|geklappt)|klappt|funktioniert\s+(?:jetzt|wieder)|läuft\s+(?:jetzt|wieder))\b`)
	negationRe = regexp.MustCompile(`(?i)\b(?:not|never|still|nope|doesn't|didn't|isn't|wasn't|won't|don't|can't|cannot|nicht|kein|keine|immer noch)\b|没|不行|还是`)
	// confirmWords: one of them is in every match of confirmRe (lower case).
	confirmWords = []string{"work", "did", "fixed", "solved", "resolved", "gone", "了", "搞定", "管用", "klappt", "funktioniert", "läuft"}
	// errorSignRe: a message reporting an error.
	errorSignRe = regexp.MustCompile(`\b[A-Z][A-Za-z]*(?:Error|Exception)\b|(?i:\berror\b|\bexception\b|\bfailed\b|\bfehler\b|报错|错误)|#(?:VALUE!|REF!|N/A|NV|DIV/0!|NAME\?|NUM!|NULL!|WERT!|BEZUG!)`)
)

// describesFile reports whether a tool sentence describes a file's structure.
func describesFile(s string) bool { return describesFileRe.MatchString(s) }

// containsAnyFold reports whether text, lower-cased, contains one of words.
func containsAnyFold(text string, words []string) bool {
	lower := strings.ToLower(text)
	for _, w := range words {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// confirmsFix reports whether a user message confirms a fix: a confirmation
// without negation, after an assistant reply that follows an error report (the
// messages before it in the chat, oldest first).
func confirmsFix(text string, before []records.Utterance) bool {
	// Every confirmation confirmRe knows contains one of confirmWords: most
	// messages are turned away by a few substring searches, not the expression
	// (it was 14% of ingest's CPU).
	if !containsAnyFold(text, confirmWords) || !confirmRe.MatchString(text) || negationRe.MatchString(text) {
		return false
	}
	assistant := false
	for i := len(before) - 1; i >= 0; i-- {
		switch strings.ToLower(before[i].Role) {
		case "assistant":
			assistant = true
		default:
			if assistant && errorSignRe.MatchString(before[i].Text) {
				return true
			}
		}
	}
	return false
}
