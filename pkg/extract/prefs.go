package extract

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentmem/agentmem/pkg/markdown"
)

// A preference is recognised by a strong marker alone, or by a weak marker together
// with a topic word (charts, formats, answers, ...): "I like line charts" is a
// preference, "I like it" is chit-chat. Each strong pattern captures the object of
// the preference, which must name something (see meaningful).
var (
	strongPrefRes = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\bI(?:'d| would)?\s+(?:really\s+|much\s+|generally\s+|usually\s+|always\s+)?prefer\b(.*)`),
		regexp.MustCompile(`(?i)\bI(?:'d| would)\s+rather\b(.*)`),
		regexp.MustCompile(`(?i)\bI\s+(?:like|love|find)\b(.+)\b(?:better|more)\b`),
		regexp.MustCompile(`(?i)\b(?:please\s+always|from now on|going forward|in (?:the )?future|by default|every time)\b(.*)`),
		regexp.MustCompile(`(?i)^(?:please\s+)?always\b(.*)`),
		regexp.MustCompile(`(?i)\buse\s+((?:the\s+|a\s+|an\s+)?[^.;!?]{1,40}?)\s+format\b`),
		regexp.MustCompile(`(?i)\bformat\s+((?:all\s+|the\s+)?(?:dates?|numbers?|amounts?|prices?|totals?|values?|percentages?|currency|times?)\s+(?:as|like|in|with)\b.*)`),
		regexp.MustCompile(`(?i)\bI\s+(?:want|need|'d like|would like)\s+((?:all\s+|the\s+|my\s+)?(?:charts?|graphs?|plots?|tables?|numbers?|dates?|answers?|responses?|replies|output|results?|reports?|summaries|amounts?|values?|totals?|percentages?)\s+(?:as|in|to be|to use|with|without|formatted|sorted|rounded)\b.*)`),
		regexp.MustCompile(`(?i)^(?:please\s+)?(?:don't|do not|never|avoid|stop)\s+((?:use|using|show|showing|add|adding|include|including|give|giving|put|putting|write|writing|make|making|round|rounding)\b.*)`),
		regexp.MustCompile(`(?i)^(?:please\s+)?(?:keep|make)\s+((?:your\s+|the\s+|all\s+)?(?:answers?|responses?|replies|explanations?|summaries|output|messages?)\s+(?:short|brief|concise|simple|minimal|clear|to the point|under|below)\b.*)`),
		regexp.MustCompile(`(?i)\b(?:be|stay)\s+((?:concise|brief|short|terse)\b.*)`),
		regexp.MustCompile(`(?i)^(?:please\s+)?(?:answer|respond|reply|write|talk)\s+(?:to me\s+)?in\s+(\S.*)`),
		regexp.MustCompile(`(?i)\bno\s+((?:emojis?|emoticons|jargon|small talk|fluff|preamble|apologies)\b.*)`),
		regexp.MustCompile(`(?i)^(?:please\s+)?(?:skip|drop|omit)\s+(the\s+(?:explanations?|intro|introduction|preamble|pleasantries|small talk)\b.*)`),
		regexp.MustCompile(`(?i)\b((?:short|brief|concise)\s+(?:answers?|responses?|replies))\s+please\b`),
	}
	// weakPrefRe is a preference only about a topic word.
	weakPrefRe = regexp.MustCompile(`(?i)\bI\s+(?:really\s+)?(?:like|love|hate|dislike|don't like|do not like|don't want|do not want|always|usually|normally|typically|mostly)\b|\bmy\s+(?:favou?rite|preferred|usual|default)\b|\b(?:favou?rite|preferred)\b`)
	topicRe    = regexp.MustCompile(`(?i)\b(?:charts?|graphs?|plots?|formats?|formatting|tables?|decimals?|dates?|numbers?|bullets?|bullet points|answers?|responses?|replies|summar(?:y|ies)|fonts?|colou?rs?|styles?|layouts?|currency|sheets?|columns?|formulas?|output|themes?|language|emojis?|dark mode|light mode|separators?|percentages?|pivot tables?|markdown|json|spreadsheets?|code|python|vba|functions?|vlookup|xlookup|index/match)\b`)
	// chartStyleRe with a marker of habit: "bar charts are my default".
	chartStyleRe  = regexp.MustCompile(`(?i)\b(?:bar|line|pie|scatter|area|column|stacked|donut|doughnut)\s+(?:charts?|graphs?|plots?)\b`)
	habitMarkerRe = regexp.MustCompile(`(?i)\b(?:prefer|preferred|like|love|hate|favou?rite|always|usually|default|rather|better|never|instead)\b`)
	// formatSpecRe with an imperative: "show dates as DD/MM/YYYY", "use two decimal places".
	formatSpecRe = regexp.MustCompile(`(?i)\b(?:YYYY|DD|MM)[-/.](?:MM|DD|YYYY)(?:[-/.](?:YYYY|DD|MM))?\b|\bISO(?:[- ]?8601)?\b|\bdecimal\s+(?:places|points|comma|point|separator)\b|\bthousands?\s+separators?\b|\b(?:\d+|one|two|three)\s+decimals?\b`)
	imperativeRe = regexp.MustCompile(`(?i)^(?:please\s+)?(?:use|show|format|write|display|give|keep|put|round|present|print)\b`)
)

// Chinese and German preferences, on the same plan: a strong marker alone (a wish
// for the future, "I prefer", an imperative about answers), a weak one (a habit
// word, "always", "please") with a topic word. A sentence reporting an error is
// never a preference ("它总是报错").
var (
	zhStrongPrefRe = regexp.MustCompile(`以后|今后|从现在起|从今以后|往后|我(?:更|比较|一般|通常)?(?:喜欢|偏好|倾向)|我习惯|我一般用|我通常用|请(?:一直|始终|总是|统一)`)
	zhWeakPrefRe   = regexp.MustCompile(`一律|总是|始终|每次都|默认|统一|尽量|最好|不要|(?:^|[，,；;])别`)
	zhTopicRe      = regexp.MustCompile(`回答|答案|回复|格式|标题|字体|图|日期|小数|千位|分隔符|字体|颜色|主题|代码|简短|简洁|语言|表格|金额|样式|排序|单位|中文|英文|表情`)
	deStrongPrefRe = regexp.MustCompile(`(?i)\bich\s+(?:bevorzuge|hätte\s+(?:gern|lieber)|nehme\s+lieber|arbeite\s+lieber|mag\s+.+\s+lieber)\b|\bvon\s+nun\s+an\b|\bab\s+(?:jetzt|sofort)\b|\b(?:zu)?künftig\b|\bin\s+zukunft\b|\bstandardmäßig\b|^(?:bitte\s+)?(?:halte|mach|fasse)\b.*\b(?:kurz|knapp|kürzer|einfach|übersichtlich)\b|^(?:bitte\s+)?(?:antworte|schreib|schreibe)\b.*\b(?:auf|in)\s+(?:deutsch|englisch)\b|^(?:bitte\s+)?(?:keine|nie|niemals|verzichte)\b`)
	deWeakPrefRe   = regexp.MustCompile(`(?i)\b(?:immer|normalerweise|meistens|gewöhnlich|in\s+der\s+regel|lieber|am\s+liebsten|grundsätzlich|mein(?:e)?\s+lieblings\p{L}*)\b`)
	deTopicRe      = regexp.MustCompile(`(?i)diagramm|format|antwort|tabelle|datum|dezimal|nachkomma|tausender|schrift|farbe|design|python|pandas|excel|code|beispiel|sprache|einleitung|emoji|zusammenfassung|sortier|währung|runde|stellen`)
)

// isPreferenceOther reports whether a Chinese or German sentence states a
// preference.
func isPreferenceOther(s string) bool {
	if errorSignRe.MatchString(s) || errorSignOtherRe.MatchString(s) {
		return false
	}
	switch {
	case zhStrongPrefRe.MatchString(s), zhWeakPrefRe.MatchString(s) && zhTopicRe.MatchString(s):
		return utf8.RuneCountInString(s) >= 4
	case deStrongPrefRe.MatchString(s), deWeakPrefRe.MatchString(s) && deTopicRe.MatchString(s):
		return meaningful(s)
	}
	return false
}

// isPreference reports whether a (filler-stripped) sentence states a preference.
func isPreference(s string) bool {
	if isQuestion(s) {
		return false
	}
	if isPreferenceOther(s) {
		return true
	}
	for _, re := range strongPrefRes {
		if m := re.FindStringSubmatch(s); m != nil && meaningful(m[1]) {
			return true
		}
	}
	switch {
	case weakPrefRe.MatchString(s) && topicRe.MatchString(s):
		return true
	case chartStyleRe.MatchString(s) && habitMarkerRe.MatchString(s):
		return true
	case formatSpecRe.MatchString(s) && (imperativeRe.MatchString(s) || habitMarkerRe.MatchString(s)):
		return true
	}
	return false
}

// Explicit requests to remember. rememberRe must start the sentence ("I don't
// remember the formula" is no request); "please remember" may stand anywhere.
var (
	rememberRe       = regexp.MustCompile(`(?i)^(?:please\s+)?(?:(?:do\s+)?remember|don'?t\s+forget|do\s+not\s+forget|never\s+forget|keep\s+in\s+mind|for\s+future\s+reference)\b(?:\s+that\b)?\s*[:,\-–—]?\s*(.*)$`)
	pleaseRememberRe = regexp.MustCompile(`(?i)\bplease\s+remember\b(?:\s+that\b)?\s*[:,\-–—]?\s*(.*)$`)
	noteThatRe       = regexp.MustCompile(`(?i)^(?:please\s+)?note(?:\s+that|\s*:)\s+((?:I|I'm|I've|I'd|my|we|we're|our)\b.*)$`)
	rememberThisRe   = regexp.MustCompile(`(?i)^(?:this|the following)\s*[:,\-–—]\s*`)
)

// remembered returns the text an explicit "remember" statement asks to keep. A
// question is no statement ("Remember the file I sent?"), except a polite request
// ("Could you please remember that ...?").
func remembered(s string) (string, bool) {
	res := []*regexp.Regexp{pleaseRememberRe}
	if !isQuestion(s) {
		res = append(res, rememberRe, noteThatRe)
	}
	for _, re := range res {
		if m := re.FindStringSubmatch(s); m != nil {
			text := strings.TrimRight(strings.TrimSpace(rememberThisRe.ReplaceAllString(m[1], "")), "? ")
			return text, meaningful(text)
		}
	}
	return "", false
}

// observeStatement records a preference or "remember" statement made in a sentence
// of a user message. Remembered text is filed under the more specific category when
// it is a preference; when it describes a file the file rule has it already.
func (s *session) observeStatement(sent string) {
	sent = stripFiller(sent)
	if what, ok := remembered(sent); ok {
		switch {
		case isPreference(what):
			s.add(markdown.CategoryUserPref, tidy(what))
		case len(fileFactsIn(what)) == 0:
			s.add(markdown.CategoryGeneral, tidy(what))
		}
		return
	}
	if isPreference(sent) {
		s.add(markdown.CategoryUserPref, tidy(sent))
	}
}

var (
	// rejectRe: a reply that turns a suggestion down and goes on ("No, a bar
	// chart please", "Nein, lieber Polars", "不，用柱状图", "いいえ、棒グラフで",
	// "아니요, 막대 그래프로 해 주세요"); group 1 or 2 is what follows. A Chinese,
	// Japanese or Korean "no" needs punctuation after it: "不错" is praise.
	rejectRe = regexp.MustCompile(`(?i)^(?:no|nope|nah|not really|rather not|nein|nee|lieber nicht)\b[\s,.!:;\-–—]*(.+)$|^(?:不用|不要|不|别|いいえ|いや|아니요|아니|아뇨)[\s,，、.。!！]+(.+)$`)
	// proposalRe: an assistant's suggestion or offer.
	proposalRe = regexp.MustCompile(`(?i)\b(?:how about|what about|i (?:would |'d )?(?:suggest|recommend|propose)|you (?:could|might|may want to|should)|shall i|should i|want me to|would you like|let's|i can|soll ich|wie wäre|ich (?:würde|schlage)|sollen wir)\b|[?？]|我建议|建议|要不要|要我|可以用|ましょうか|どうですか|할까요|어때요|드릴까요`)
)

// proposes reports whether an assistant message suggests or offers something.
func proposes(text string) bool { return proposalRe.MatchString(text) }

// observeRejection keeps the alternative a user names when turning down the
// assistant's suggestion (issue 29 item 8): "No, use Polars instead" after "How
// about pandas?" is the preference, the suggestion is not. A rejection with
// nothing in its place ("No, that didn't work", "no thanks"), a question or an
// error report names no alternative; a sentence that is a preference on its own
// is kept by the preference rule already.
func (s *session) observeRejection(sent string) {
	m := rejectRe.FindStringSubmatch(strings.TrimSpace(sent))
	if m == nil {
		return
	}
	alt := strings.TrimSpace(m[1] + m[2])
	switch {
	case isQuestion(alt), negationRe.MatchString(alt), persistsRe.MatchString(alt),
		errorSignRe.MatchString(alt), errorSignOtherRe.MatchString(alt), isPreference(sent):
		return
	case utf8.RuneCountInString(alt) < 2, !namesAlternative(alt):
		return
	}
	s.add(markdown.CategoryUserPref, tidy(strings.TrimRight(alt, ".!。！"))+" (preferred to the assistant's suggestion)")
}

// declineWords close a rejection without naming anything in its place ("no,
// that's fine", "nein danke", "不用了，谢谢").
var declineWords = setOf("fine", "thanks", "thank", "thx", "good", "worries", "need", "needed", "necessary",
	"later", "sorry", "bye", "wait", "stop", "leave", "keep", "as", "is", "that's", "it's", "i'm", "alright",
	"danke", "gut", "passt", "schon", "nicht", "nötig", "了", "谢谢", "算了", "没事", "好的")

// namesAlternative reports whether the rest of a rejection names something: a
// word that is neither empty (see meaningful) nor a polite close.
func namesAlternative(alt string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(alt), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	}) {
		if !emptyWords[w] && !declineWords[w] {
			return true
		}
	}
	return false
}
