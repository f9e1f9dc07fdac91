package extract

import (
	"regexp"
	"strings"

	"github.com/agentmem/agentmem/pkg/markdown"
)

var (
	// errorSignRe marks a sentence (or a traceback line) reporting an error.
	errorSignRe = regexp.MustCompile(`\b[A-Z][A-Za-z]*(?:Error|Exception)\b|(?i:\berror:\s*\S|\bexception\b|\bfailed with\b|\bnot found\b|\b(?:get|got|getting|gets|throws?|threw|raises?|raised|shows?|showed|showing|returns?|returned)\s+(?:an?\s+|the\s+|this\s+|that\s+)?(?:\w+\s+)?error\b)|#(?:VALUE!|REF!|N/A|DIV/0!|NAME\?|NUM!|NULL!|SPILL!|CALC!)`)
	// errorSignOtherRe: the same signs in Chinese and German, and the German
	// names of Excel's errors.
	errorSignOtherRe = regexp.MustCompile(`报错|错误|出错|异常|失败|无法(?:打开|读取|运行|连接|导入)|(?i:\bFehler(?:meldung)?\b|\bfunktioniert\s+nicht\b|\bschlägt\s+fehl\b)|#(?:NV|WERT!|BEZUG!|ZAHL!|ÜBERLAUF!)`)
	errorPrefixRe    = regexp.MustCompile(`(?i)^error\s*:\s*`)
	// fixPhraseRe: "fixed it by X", "the fix was to X", "it worked after X".
	fixPhraseRe = regexp.MustCompile(`(?i)\b(?:(?:(?:I|we|you)\s+)?(?:fixed|solved|resolved)(?:\s+(?:it|this|that|the\s+(?:issue|problem|error)))?\s+by|the\s+(?:fix|solution)\s+(?:was|is)\s*:?(?:\s+to)?|worked\s+(?:after|once|when)|works\s+(?:now\s+)?(?:after|once))\s+(.+)`)
	// confirmRe: the user says the assistant's suggestion worked.
	confirmRe = regexp.MustCompile(`(?i)\b(?:that|it|this|which|the fix|your (?:fix|solution|suggestion|code|formula))\s+(?:worked|works|did it|did the trick|fixed it|solved it|helped)\b|\b(?:works|working)\s+(?:now|fine|perfectly)\b|\bit'?s\s+working\b|\b(?:problem|issue|error)\s+(?:is\s+)?(?:solved|fixed|resolved|gone)\b|\ball good now\b|\b(?:runs|running|loads|compiles|passes|builds)\s+(?:fine\s+)?(?:now|again)\b|\b(?:runs|loads|compiles)\s+fine\b|\bworks\s+like\s+a\s+charm\b|^(?:fixed|solved|works|it works)[.!]*$`)
	// confirmOtherRe: the same in Chinese and German ("可以了", "成功了", "问题解决了",
	// "das hat funktioniert", "jetzt klappt es", "läuft jetzt").
	confirmOtherRe = regexp.MustCompile(`可以了|好了|成功了|解决了|搞定|行了|有效|管用|能用了|正常了|(?i:\bhat\s+(?:funktioniert|geklappt)\b|\bfunktioniert\s+(?:jetzt|wieder|einwandfrei|super)\b|\bklappt\b|\bjetzt\s+(?:funktioniert|geht|läuft)\b|\bgeht\s+(?:jetzt|wieder)\b|\bläuft\s+(?:jetzt|wieder)\b|\b(?:problem|fehler)\s+(?:ist\s+)?(?:gelöst|behoben|weg)\b|\bläuft\b[.!]*$)|直りました|直った|動きました|動いた|解決しました|うまくいきました|해결됐|해결되었|해결했|작동해요|잘\s*돼요|잘\s*됩니다|고쳐졌`)
	// noMoreErrorsRe: the error is gone, said with a negation ("no more
	// errors", "kein Fehler mehr", "没有报错了", "エラーが出なくなった",
	// "에러가 안 나요"); negationRe must not turn it away.
	noMoreErrorsRe = regexp.MustCompile(`(?i)\bno\s+more\s+(?:errors?|exceptions?)\b|\bkein(?:e)?\s+fehler(?:meldung)?\s+mehr\b|(?:没有|没|不)再?(?:报错|出错)了|エラーが(?:出なく|消え)|(?:에러|오류)(?:가)?\s*안\s*(?:나|떠)`)
	// persistsRe: the pending error is still there ("still #N/A"), not a new one.
	persistsRe = regexp.MustCompile(`(?i)\b(?:still|again|same error|keep getting|immer noch|noch immer|wieder|gleiche fehler)\b|还是|仍然|依然|又`)
	negationRe = regexp.MustCompile(`(?i)\b(?:not|never|still|nope|doesn't|didn't|isn't|wasn't|won't|don't|can't|cannot|nicht|kein|keine|nie|immer noch|noch immer)\b|不|没|还是|仍然`)
	// pleasantryRe: an assistant sentence that is no part of a fix.
	pleasantryRe = regexp.MustCompile(`(?i)^(?:sure|of course|certainly|great|good (?:question|catch)|no problem|happy to help|glad (?:it|that|to)\b.*|let me know\b.*|hope (?:this|that|it) helps.*|gern(?:e)?|klar|好的|当然|没问题)[.!。！]*$`)
	// fixVerbRe picks the sentence of an assistant reply that says what to do.
	fixVerbRe      = regexp.MustCompile(`(?i)\b(?:use|change|replace|rename|add|remove|delete|wrap|set|convert|install|upgrade|downgrade|try|make sure|switch|update|pass|specify|cast|strip|trim|drop|enable|disable|move|restart|save|reopen|select|apply|format|parse)\b`)
	trailingJoinRe = regexp.MustCompile(`(?i)[\s,;:\-–—]*(?:\b(?:but|and|so|then)\b)?[\s,;:\-–—]*$`)
)

// Bounds on remembered text: an entry is a note, not a log.
const (
	maxErrorRunes = 200
	maxFixRunes   = 500
)

// errorTracker follows the last unresolved error of a session and the assistant
// reply given since, until a fix is stated or confirmed.
type errorTracker struct {
	pending   string // error text; "" when none
	suggested string // last assistant reply since the error
}

// observeErrors applies the error rule to one sentence of a message.
func (s *session) observeErrors(role, sent string) {
	sign := errorSignRe.FindStringIndex(sent)
	if sign == nil {
		sign = errorSignOtherRe.FindStringIndex(sent)
	}
	fix := fixPhraseRe.FindStringSubmatchIndex(sent)
	if role == RoleTool {
		fix = nil // tool output reports errors, it does not judge fixes
	}
	switch {
	case sign != nil && fix != nil && sign[0] < fix[0] && role != RoleAssistant:
		// "I got KeyError: 'Date' but fixed it by renaming the column."
		s.solved(errorText(sent[:fix[0]]), sent[fix[2]:fix[3]])
		return
	case fix != nil && s.errs.pending != "":
		s.solved(s.errs.pending, sent[fix[2]:fix[3]])
		return
	case role == RoleUser && s.errs.pending != "" && s.errs.suggested != "" && confirmsFix(sent):
		if what := fixSummary(s.errs.suggested); what != "" {
			s.solved(s.errs.pending, what)
		}
		if noMoreErrorsRe.MatchString(sent) {
			return // "没有报错了" names an error that is gone, not a new one
		}
	}
	if sign != nil && role != RoleAssistant && (s.errs.pending == "" || !persistsRe.MatchString(sent)) {
		if e := errorText(sent); e != "" {
			s.errs = errorTracker{pending: e}
		}
	}
}

func (s *session) solved(errText, fix string) {
	fix = strings.TrimRight(strings.TrimSpace(fix), " .")
	if errText != "" && meaningful(fix) {
		s.add(markdown.CategoryErrorSolution, "Error: "+errText+". Fix: "+tidy(clip(fix, maxFixRunes)))
	}
	s.errs = errorTracker{}
}

// errorText is the error as it will be remembered: the sentence without openers, a
// leading "Error:", and trailing punctuation or conjunctions.
func errorText(sent string) string {
	e := errorPrefixRe.ReplaceAllString(stripFiller(sent), "")
	e = trailingJoinRe.ReplaceAllString(e, "")
	e = strings.TrimRight(e, " .")
	return tidy(clip(e, maxErrorRunes))
}

// confirmsFix reports whether a user sentence says the fix worked: a
// confirmation without a negation, or the error said to be gone.
func confirmsFix(sent string) bool {
	if isQuestion(sent) {
		return false
	}
	if noMoreErrorsRe.MatchString(sent) {
		return !persistsRe.MatchString(sent)
	}
	return (confirmRe.MatchString(sent) || confirmOtherRe.MatchString(sent)) && !negationRe.MatchString(sent)
}

// fixSummary is what an assistant reply told the user to do: the whole reply (a
// fix is often a cause, a step and its code), less its questions and
// pleasantries, code lines joined in, at most maxFixRunes.
func fixSummary(reply string) string {
	var parts []string
	for _, s := range sentences(reply) {
		if !s.code && (isQuestion(s.text) || pleasantryRe.MatchString(s.text)) {
			continue
		}
		parts = append(parts, s.text)
	}
	return strings.Join(parts, " ")
}
