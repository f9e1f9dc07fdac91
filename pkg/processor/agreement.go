package processor

import (
	"regexp"
	"strings"

	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/records"
)

// ReasonAgreement: the user agreed to what the assistant said about them.
const ReasonAgreement = "user agrees with a statement about them"

var (
	// agreementRe: a reply made only of agreement ("yes", "exactly", "that's
	// right", "ja genau", "对", "はい、そうです", "네 맞아요"), on the folded text.
	agreementRe = regexp.MustCompile(`^(?:(?:yes|yeah|yep|yup|exactly|right|correct|true|indeed|absolutely|precisely|spot on|that'?s (?:right|correct|it|true)|that is (?:right|correct)|ja|jawohl|genau|richtig|stimmt|das stimmt|korrekt|对|对的|对啊|对呀|是的|是啊|没错|正确|嗯|はい|ええ|うん|そう|そうです|そうだよ|その通り(?:です)?|네|예|응|맞아|맞아요|맞습니다|그래|그래요)[\s,，.。!！~～、]*)+$`)
	// confirmTagRe: an opener or tag that asks for confirmation around a
	// statement ("So ...", "..., right?", "..., richtig?", "…，对吧？").
	confirmOpenRe = regexp.MustCompile(`(?i)^(?:so|ok(?:ay)?|just to (?:confirm|check)|to confirm|if i understand (?:you )?correctly|also|dann|also gut|所以|那么|也就是说)[\s,，:]+`)
	confirmTagRe  = regexp.MustCompile(`(?i)[\s,，]*(?:right|correct|is that right|is that correct|yes|no|isn't it|aren't you|don't you|richtig|oder|stimmt'?s|nicht wahr|对吧|对吗|是吗|是吧|ですね|ですよね|よね|죠|맞죠|맞나요)?[\s?？.。!！]*$`)
	// aboutUserRe: the sentence addresses the user ("you", "your", "Sie",
	// "Ihr", "du", "dein", 你, 您).
	aboutUserRe = regexp.MustCompile(`(?i)\b(?:you|your|you're|you've|sie|ihr|ihre|ihren|ihrem|ihrer|du|dein|deine|deinen|deinem|deiner)\b|你|您`)
	// offerRe: the assistant speaks of itself or offers to act ("Shall I ...",
	// "Do you want me to ...", "Soll ich ...", "要我…"): a yes to it is consent,
	// not a fact.
	offerRe = regexp.MustCompile(`(?i)\b(?:i|me|my|we|us|let's|let me|would you like|do you want|want me|soll ich|ich|mir|mich|wir|möchten sie|willst du|möchtest du)\b|我|要不要|需要.*吗|ましょうか|しましょうか|私|僕|할까요|드릴까요|제가|저는`)
	// questionInversions turn the user's words of a yes-no question into a
	// statement: "do I use Poetry" → "I use Poetry", "am I based in Munich" →
	// "I am based in Munich".
	questionInversions = []replacement{
		{regexp.MustCompile(`(?i)^(?:do|does|did) (I|we) `), "$1 "},
		{regexp.MustCompile(`(?i)^(?:am|are) I `), "I am "},
		{regexp.MustCompile(`(?i)^(?:have) I `), "I have "},
		{regexp.MustCompile(`(?i)^(?:was|were) I `), "I was "},
	}
)

// agreedStatement returns, when text only agrees and the message before it is
// an assistant's statement or yes-no question about the user, that statement in
// the user's words: "Your fiscal year starts in April, right?" answered "Yes,
// exactly" is the user saying "My fiscal year starts in April". An offer ("Shall
// I ...?") answered yes is consent to an action, and gives nothing.
func agreedStatement(text string, before []records.Utterance) (string, bool) {
	if len(before) == 0 || !agreementRe.MatchString(bm25.Fold(strings.TrimSpace(text))) {
		return "", false
	}
	last := before[len(before)-1]
	if strings.ToLower(last.Role) != "assistant" {
		return "", false
	}
	ss := splitSentences(last.Text)
	if len(ss) == 0 {
		return "", false
	}
	s := ss[len(ss)-1].text
	if !aboutUserRe.MatchString(s) || offerRe.MatchString(s) {
		return "", false
	}
	s = confirmTagRe.ReplaceAllString(confirmOpenRe.ReplaceAllString(s, ""), "")
	// Two content words suffice: the assistant's question is the context that
	// a fragment lacks ("You're based in Munich?").
	if contentWords(words(s)) < 2 && cjkRunes(s) < 4 {
		return "", false
	}
	for _, r := range secondPerson {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	for _, r := range questionInversions {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	if firstPerson[firstWord(s)] {
		return cleanStatement(s), true
	}
	// Another language, or a question whose verb the rules cannot move ("Is my
	// deadline Friday"): the exchange is kept as the user's confirmation.
	return cleanStatement("User confirmed: " + s), true
}
