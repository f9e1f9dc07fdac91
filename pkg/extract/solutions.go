package extract

import (
	"regexp"
	"strings"

	"github.com/agentmem/agentmem/pkg/markdown"
)

var (
	// errorSignRe marks a sentence (or a traceback line) reporting an error.
	errorSignRe   = regexp.MustCompile(`\b[A-Z][A-Za-z]*(?:Error|Exception)\b|(?i:\berror:\s*\S|\bexception\b|\bfailed with\b|\bnot found\b|\b(?:get|got|getting|gets|throws?|threw|raises?|raised|shows?|showed|showing|returns?|returned)\s+(?:an?\s+|the\s+|this\s+|that\s+)?(?:\w+\s+)?error\b)|#(?:VALUE!|REF!|N/A|DIV/0!|NAME\?|NUM!|NULL!|SPILL!|CALC!)`)
	errorPrefixRe = regexp.MustCompile(`(?i)^error\s*:\s*`)
	// fixPhraseRe: "fixed it by X", "the fix was to X", "it worked after X".
	fixPhraseRe = regexp.MustCompile(`(?i)\b(?:(?:(?:I|we|you)\s+)?(?:fixed|solved|resolved)(?:\s+(?:it|this|that|the\s+(?:issue|problem|error)))?\s+by|the\s+(?:fix|solution)\s+(?:was|is)\s*:?(?:\s+to)?|worked\s+(?:after|once|when)|works\s+(?:now\s+)?(?:after|once))\s+(.+)`)
	// confirmRe: the user says the assistant's suggestion worked.
	confirmRe = regexp.MustCompile(`(?i)\b(?:that|it|this|which|the fix|your (?:fix|solution|suggestion|code|formula))\s+(?:worked|works|did it|did the trick|fixed it|solved it|helped)\b|\b(?:works|working)\s+(?:now|fine|perfectly)\b|\bit'?s\s+working\b|\b(?:problem|issue|error)\s+(?:is\s+)?(?:solved|fixed|resolved|gone)\b|\ball good now\b`)
	// persistsRe: the pending error is still there ("still #N/A"), not a new one.
	persistsRe = regexp.MustCompile(`(?i)\b(?:still|again|same error|keep getting)\b`)
	negationRe = regexp.MustCompile(`(?i)\b(?:not|never|still|nope|doesn't|didn't|isn't|wasn't|won't|don't|can't|cannot)\b`)
	// fixVerbRe picks the sentence of an assistant reply that says what to do.
	fixVerbRe      = regexp.MustCompile(`(?i)\b(?:use|change|replace|rename|add|remove|delete|wrap|set|convert|install|upgrade|downgrade|try|make sure|switch|update|pass|specify|cast|strip|trim|drop|enable|disable|move|restart|save|reopen|select|apply|format|parse)\b`)
	trailingJoinRe = regexp.MustCompile(`(?i)[\s,;:\-–—]*(?:\b(?:but|and|so|then)\b)?[\s,;:\-–—]*$`)
)

// Bounds on remembered text: an entry is a note, not a log.
const (
	maxErrorRunes = 200
	maxFixRunes   = 300
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
	case role == RoleUser && s.errs.pending != "" && s.errs.suggested != "" &&
		!isQuestion(sent) && confirmRe.MatchString(sent) && !negationRe.MatchString(sent):
		if what := fixSummary(s.errs.suggested); what != "" {
			s.solved(s.errs.pending, what)
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

// fixSummary picks what an assistant reply told the user to do: the first statement
// with a verb of fixing, else its first sentence, else the first line of its code.
func fixSummary(reply string) string {
	var first, code string
	for _, s := range sentences(reply) {
		switch {
		case s.code:
			if code == "" {
				code = s.text
			}
		case !isQuestion(s.text) && fixVerbRe.MatchString(s.text):
			return s.text
		case first == "":
			first = s.text
		}
	}
	if first != "" {
		return first
	}
	return code
}
