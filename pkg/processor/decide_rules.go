package processor

import (
	"context"
	"iter"
	"regexp"
	"slices"
	"strings"

	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/textnorm"
)

// RuleDecider is the offline write decision (SPEC C3). It is deterministic and
// lexical; the rules and their limits are listed in doc.go.
type RuleDecider struct{}

// NewRuleDecider returns the offline write decider.
func NewRuleDecider() *RuleDecider { return &RuleDecider{} }

// Reasons the rule decider gives; they are stable so logs and tests can match them.
const (
	ReasonEmpty         = "empty"
	ReasonSystem        = "system message"
	ReasonRemember      = "explicit remember request"
	ReasonChitChat      = "greeting or chit-chat"
	ReasonSingleToken   = "single token"
	ReasonFragment      = "fragment"
	ReasonQuestion      = "impersonal question"
	ReasonImpersonal    = "no first-person fact"
	ReasonNoUserFact    = "assistant or tool text states no user fact"
	ReasonPersonalFact  = "first-person statement"
	ReasonAssistantFact = "assistant or tool states a user fact"
	ReasonConfirmedFix  = "user confirms a fix"
)

// minContentWords is the fewest content words (see stopWords) a written statement
// has; fewer is a fragment ("I agree", "the weather").
const minContentWords = 3

// Decide applies the rules of doc.go to obs. It never fails; the error is there
// for the interface.
func (RuleDecider) Decide(_ context.Context, obs records.Observation) (records.Episode, error) {
	ep := records.Episode{Who: speaker(obs), Time: obs.TS}
	text := strings.TrimSpace(obs.Text)
	role := strings.ToLower(strings.TrimSpace(obs.Role))
	machine := role == "assistant" || role == "tool" || role == "function"

	switch {
	case text == "":
		ep.Reason = ReasonEmpty
		return ep, nil
	case role == "system":
		ep.Reason = ReasonSystem
		return ep, nil
	}
	if !machine {
		if body, ok := rememberBody(text); ok {
			ep.Write, ep.Reason = true, ReasonRemember
			ep.Thing = cleanStatement(body)
			ep.Context = describe(ReasonRemember, ep.Who, obs.ChatID)
			return ep, nil
		}
		if body, ok := rememberOther(text); ok {
			ep.Write, ep.Reason = true, ReasonRemember
			ep.Thing = cleanStatement(body)
			ep.Context = describe(ReasonRemember, ep.Who, obs.ChatID)
			return ep, nil
		}
		if fact, ok := agreedStatement(text, obs.Before); ok {
			ep.Write, ep.Reason = true, ReasonAgreement
			ep.Thing = fact
			ep.Context = describe(ReasonAgreement, ep.Who, obs.ChatID)
			return ep, nil
		}
		if confirmsFix(text, obs.Before) {
			ep.Write, ep.Reason = true, ReasonConfirmedFix
			ep.Thing = cleanStatement(text)
			ep.Context = describe("error and confirmed fix", ep.Who, obs.ChatID)
			return ep, nil
		}
	}
	// Sentences are cut, and trimmed, only at runes that are not word runes, so
	// the words of the sentences, in order, are the words of the text: the text is
	// tokenized once, and sentence i's words are ws[bounds[i]:bounds[i+1]].
	sentences := splitSentences(text)
	ws := make([]string, 0, strings.Count(text, " ")+1) // about one word per space
	bounds := make([]int, len(sentences)+1)
	for i, s := range sentences {
		ws = appendWords(ws, s.text)
		bounds[i+1] = len(ws)
	}
	switch {
	case allChitChat(ws): // every sentence is chit-chat
		ep.Reason = ReasonChitChat
		return ep, nil
	case len(ws) <= 1 && cjkRunes(text) < 4:
		ep.Reason = ReasonSingleToken
		return ep, nil
	}

	var kept []string
	questions := 0
	for i, s := range sentences {
		sw := ws[bounds[i]:bounds[i+1]]
		switch {
		case s.question || (len(sw) > 0 && questionWords[sw[0]]):
			questions++
		case allChitChat(sw), contentWords(sw) < minContentWords && cjkRunes(s.text) < 4:
		case machine && statesUserFact(sw), !machine && isPersonalStatement(sw),
			!machine && isStandingStatement(s.text, sw), role == "tool" && describesFile(s.text):
			if c := cleanStatement(s.text); !slices.Contains(kept, c) {
				kept = append(kept, c)
			}
		}
	}
	if len(kept) == 0 {
		switch {
		case machine:
			ep.Reason = ReasonNoUserFact
		case questions > 0:
			ep.Reason = ReasonQuestion
		case contentWords(ws) < minContentWords:
			ep.Reason = ReasonFragment
		default:
			ep.Reason = ReasonImpersonal
		}
		return ep, nil
	}
	ep.Write = true
	ep.Thing = strings.Join(kept, " ")
	ep.Reason = ReasonPersonalFact
	if machine {
		ep.Reason = ReasonAssistantFact
	}
	ep.Context = describe(statementKind(eachWord(ep.Thing)), ep.Who, obs.ChatID)
	return ep, nil
}

// speaker is who said obs: the speaker's name when known (a conversation between
// two people has two speakers, and C7 must not merge what they said into one), else
// the role itself.
func speaker(obs records.Observation) string {
	role := strings.ToLower(strings.TrimSpace(obs.Role))
	switch {
	case strings.TrimSpace(obs.Who) != "":
		return strings.TrimSpace(obs.Who)
	case role != "":
		return strings.TrimSpace(obs.Role)
	}
	return "user"
}

// describe is the short context of an episode: its purpose, speaker and chat.
func describe(kind, who, chatID string) string {
	if chatID == "" {
		return kind + " by " + who
	}
	return kind + " by " + who + " in chat " + chatID
}

var (
	// rememberPrefix matches an opening request to remember: "Remember, ...",
	// "Please don't forget that ...", "Can you keep in mind: ...".
	rememberPrefix = regexp.MustCompile(`(?i)^\s*(?:(?:hey|ok|okay|so|and|also|oh)\s*[,!]?\s+)?(?:(?:please|pls)\s+)?` +
		`((?:can|could|would|will)\s+you\s+(?:please\s+)?)?` +
		`(?:remember|don'?t\s+forget|do\s+not\s+forget|keep\s+in\s+mind|make\s+a\s+note|take\s+note|note\s+down|note)\b` +
		`(?:\s+(?:of\s+)?(?:this|it))?\s*[,:;!\-–]*\s*(?:that\b\s*)?`)
	// rememberSuffix matches a closing request: "..., please remember that."
	rememberSuffix = regexp.MustCompile(`(?i)[\s,;.!\-–]*(?:(?:please|pls)\s+)?(?:remember|don'?t\s+forget|do\s+not\s+forget|keep\s+in\s+mind|note)\s+(?:that|this|it)\s*[.!]*\s*$`)
)

// rememberBody returns what an explicit remember request asks to keep, when text is
// one and the body carries personal or substantial information: a first-person
// word, or at least minContentWords content words. "Remember when we met?" is a
// question, not a request, unless it is phrased "can you remember ...?".
func rememberBody(text string) (string, bool) {
	if !mentionsRemembering(text) {
		return "", false
	}
	text = textnorm.FoldQuotes(text)
	body := ""
	if m := rememberPrefix.FindStringSubmatchIndex(text); m != nil {
		body = text[m[1]:]
		polite := m[2] >= 0
		if strings.HasSuffix(strings.TrimSpace(body), "?") && !polite {
			return "", false
		}
	} else if loc := rememberSuffix.FindStringIndex(text); loc != nil {
		body = text[:loc[0]]
	} else {
		return "", false
	}
	body = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(body), "?"))
	ws := words(body)
	if len(ws) == 0 {
		return "", false
	}
	return body, hasFirstPerson(ws) || contentWords(ws) >= minContentWords
}

// rememberKeywords: every alternative of rememberPrefix and rememberSuffix
// contains one of them.
var rememberKeywords = []string{"remember", "forget", "mind", "note"}

// mentionsRemembering reports whether text holds one of rememberKeywords in any
// case; text without one cannot match either expression. It spares most messages
// the two expressions (the suffix one is unanchored and backtracks at every
// position). An ASCII comparison is exact here: no letter of the keywords has a
// case fold outside ASCII (only k and s do).
func mentionsRemembering(text string) bool {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		for _, k := range rememberKeywords {
			// The first byte is compared here so that most positions cost one
			// comparison per keyword.
			if c == k[0] && i+len(k) <= len(text) && asciiEqualFold(text[i:i+len(k)], k) {
				return true
			}
		}
	}
	return false
}

// asciiEqualFold compares s with the lower-case ASCII word lower, ignoring the
// case of s's ASCII letters.
func asciiEqualFold(s, lower string) bool {
	for i := 0; i < len(lower); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

var firstPerson = setOf("i", "i'm", "i've", "i'd", "i'll", "im", "ive", "me", "my", "mine", "myself",
	"we", "we're", "we've", "we'd", "we'll", "us", "our", "ours", "ourselves")

func hasFirstPerson(ws []string) bool {
	for _, w := range ws {
		if firstPerson[w] {
			return true
		}
	}
	return false
}

// requestMarkers make a first-person sentence a request to the assistant rather
// than a fact about the speaker ("I want you to write a poem", "help me ...").
var requestMarkers = [][]string{
	{"i", "want", "you"}, {"i", "need", "you"}, {"i'd", "like", "you"}, {"i", "would", "like", "you"},
	{"help", "me"}, {"tell", "me"}, {"show", "me"}, {"give", "me"}, {"let", "me", "know"},
	{"send", "me"}, {"remind", "me"}, {"let's"},
}

// isPersonalStatement: a declarative sentence with a first-person word that is
// not a request to the assistant.
func isPersonalStatement(ws []string) bool {
	if len(ws) == 0 || !hasFirstPerson(ws) {
		return false
	}
	if ws[0] == "please" || (len(ws) > 1 && ws[1] == "you" && questionWords[ws[0]]) {
		return false
	}
	for _, m := range requestMarkers {
		if containsRun(ws, m) {
			return false
		}
	}
	return true
}

// adviceWords after "you" make a sentence advice or an offer, not a fact.
var adviceWords = setOf("can", "could", "should", "might", "may", "must", "will", "would", "need", "want",
	"shall", "welcome", "try")

// statesUserFact: an assistant or tool sentence whose subject is the user ("You
// live in Berlin", "Your sales files have columns ..."), not advice ("You can ...").
func statesUserFact(ws []string) bool {
	if len(ws) < 2 {
		return false
	}
	switch ws[0] {
	case "your", "you're", "you've":
		return true
	case "you":
		return !adviceWords[ws[1]]
	}
	return false
}

func containsRun(ws, run []string) bool {
	for i := 0; i+len(run) <= len(ws); i++ {
		match := true
		for j, w := range run {
			if ws[i+j] != w {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// chitChatWords are the words greetings, thanks, acknowledgements and fillers are
// made of; a sentence made only of them carries nothing to remember.
var chitChatWords = setOf("hi", "hello", "hey", "heya", "hiya", "yo", "sup", "thanks", "thank", "thx", "ty",
	"you", "ok", "okay", "k", "kk", "lol", "lmao", "rofl", "haha", "hahaha", "hehe", "cool", "great", "nice",
	"awesome", "good", "morning", "afternoon", "evening", "night", "bye", "goodbye", "see", "ya", "later",
	"yes", "yeah", "yep", "yup", "no", "nope", "sure", "fine", "alright", "right", "wow", "oh", "ah", "hmm",
	"welcome", "please", "np", "gotcha", "got", "it", "i", "i'm", "im", "am", "so", "very", "much", "too",
	"well", "how", "are", "doing", "what's", "up", "all", "the", "best", "cheers", "congrats", "sorry",
	"again", "really", "appreciate", "that", "agree", "know", "think", "guess", "understand", "mean",
	"not", "don't", "perfect", "exactly", "indeed", "true", "interesting", "to", "meet", "hear", "glad",
	"there", "a", "lot", "have", "day", "what", "with", "and", "makes", "sense", "sounds", "is", "was",
	"for", "your", "help", "me", "of", "course", "problem", "worries", "let", "go", "done")

func allChitChat(ws []string) bool {
	for _, w := range ws {
		if !chitChatWords[w] {
			return false
		}
	}
	return true
}

// stopWords do not count as content: articles, prepositions, conjunctions,
// auxiliaries, pronouns other than first person, and empty adverbs. First-person
// words do count, so "I like hiking" (3) is a statement and "I agree" (2) is not.
var stopWords = setOf("a", "an", "the", "and", "or", "but", "nor", "so", "yet", "if", "then", "than",
	"of", "in", "on", "at", "to", "for", "from", "by", "with", "about", "as", "into", "onto", "over",
	"under", "up", "down", "out", "off", "is", "am", "are", "was", "were", "be", "been", "being", "do",
	"does", "did", "has", "have", "had", "will", "would", "shall", "should", "can", "could", "may",
	"might", "must", "it", "it's", "its", "this", "that", "these", "those", "there", "here", "he", "she",
	"they", "them", "him", "her", "his", "hers", "their", "you", "your", "yours", "you're", "just",
	"really", "very", "too", "also", "now", "then", "not", "no", "yes", "oh", "well", "what", "which",
	"who", "whom", "how", "why", "when", "where", "some", "any", "all", "each", "every")

func contentWords(ws []string) int {
	n := 0
	for _, w := range ws {
		if !stopWords[w] {
			n++
		}
	}
	return n
}

// statementKinds classify a written statement for its context, first match wins.
var statementKinds = []struct {
	kind  string
	words []string
}{
	{"preference", []string{"like", "likes", "love", "loves", "prefer", "prefers", "enjoy", "enjoys", "hate",
		"dislike", "favorite", "favourite", "fan"}},
	{"plan", []string{"will", "i'll", "we'll", "going", "plan", "plans", "planning", "intend", "hope",
		"tomorrow", "next", "soon"}},
	{"relationship", []string{"sister", "brother", "mother", "mom", "mum", "father", "dad", "wife", "husband",
		"son", "daughter", "friend", "partner", "boyfriend", "girlfriend", "family", "kids", "children",
		"parents", "cousin", "aunt", "uncle", "grandma", "grandpa", "grandmother", "grandfather", "married"}},
	{"location", []string{"live", "lives", "lived", "moved", "move", "moving", "born", "city", "country",
		"home", "from"}},
	{"identity or affiliation", []string{"name", "student", "work", "works", "job", "study", "studying",
		"university", "school", "company", "employer", "engineer", "teacher", "doctor", "years"}},
}

// statementKindOf maps each word of statementKinds to the index of the first
// kind that lists it, so a statement's words are looked up once, not once per kind.
var statementKindOf = func() map[string]int {
	m := make(map[string]int)
	for i, k := range statementKinds {
		for _, w := range k.words {
			if _, ok := m[w]; !ok {
				m[w] = i
			}
		}
	}
	return m
}()

// statementKind is the first of statementKinds that lists one of ws (a
// possessive counts as its noun).
func statementKind(ws iter.Seq[string]) string {
	first := len(statementKinds)
	for w := range ws {
		if i, ok := statementKindOf[strings.TrimSuffix(w, "'s")]; ok && i < first {
			first = i
		}
	}
	if first == len(statementKinds) {
		return "personal fact or event"
	}
	return statementKinds[first].kind
}
