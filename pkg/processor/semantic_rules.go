package processor

import (
	"cmp"
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/textnorm"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// RuleSemanticWriter is the offline semantic writer (SPEC C8): it turns
// first-person statements of stable attributes into third-person facts. The
// patterns and their limits are listed in doc.go.
type RuleSemanticWriter struct{}

// NewRuleSemanticWriter returns the offline semantic writer.
func NewRuleSemanticWriter() *RuleSemanticWriter { return &RuleSemanticWriter{} }

// Facts returns the stable facts stated in episodes, earliest episode first, none
// of which duplicates a known fact or another returned fact.
func (RuleSemanticWriter) Facts(_ context.Context, episodes []vectorstore.Record, known []vectorstore.Record) ([]records.Fact, error) {
	seen := knownFacts(known)
	// Earliest first, so a fact stated twice in the batch gets its first time.
	ordered := slices.Clone(episodes)
	slices.SortStableFunc(ordered, func(a, b vectorstore.Record) int {
		return cmp.Or(a.TS.Compare(b.TS), cmp.Compare(a.ID, b.ID))
	})
	var out []records.Fact
	for _, ep := range ordered {
		for _, s := range splitSentences(recordText(ep)) {
			if s.question {
				continue
			}
			f, ok := stableFact(s.text, ep.Who)
			if !ok {
				continue
			}
			if n := textnorm.Normalize(f); !seen[n] {
				seen[n] = true
				out = append(out, records.Fact{Fact: f, SourceChatID: ep.ChatID, FirstSeen: ep.TS})
			}
		}
	}
	return out, nil
}

// knownFacts is the set of normalised texts of known semantic memories.
func knownFacts(known []vectorstore.Record) map[string]bool {
	seen := make(map[string]bool, len(known))
	for _, k := range known {
		if n := textnorm.Normalize(recordText(k)); n != "" {
			seen[n] = true
		}
	}
	return seen
}

// factRule rewrites a first-person statement of a stable attribute; "{S}" in the
// template stands for the subject ("User", or the speaker's name).
type factRule struct {
	re   *regexp.Regexp
	tmpl string
}

// lead skips conversational openers before the statement.
const lead = `(?i)^(?:(?:also|btw|actually|and|so|oh|well|anyway)\s*,?\s+)?`

var factRules = []factRule{
	{regexp.MustCompile(lead + `i(?:'m| am) (a|an|the) (.+)$`), "{S} is $1 $2"},
	{regexp.MustCompile(lead + `i(?:'m| am) ((?:originally )?from|based in|allergic to|married to|vegetarian|vegan|\d+ years old)(.*)$`), "{S} is $1$2"},
	{regexp.MustCompile(lead + `i (?:currently )?lives? (.+)$`), "{S} lives $1"},
	{regexp.MustCompile(lead + `i (?:currently )?work (.+)$`), "{S} works $1"},
	{regexp.MustCompile(lead + `i (?:currently )?study (.+)$`), "{S} studies $1"},
	{regexp.MustCompile(lead + `i (grew up|was born|moved to|relocated to) (.+)$`), "{S} $1 $2"},
	{regexp.MustCompile(lead + `i (?:really )?(like|love|enjoy|hate|dislike|adore)s? (.+)$`), "{S} ${1}s $2"},
	{regexp.MustCompile(lead + `i (?:really )?prefer (.+)$`), "{S} prefers $1"},
	{regexp.MustCompile(lead + `i (?:don't|do not) (like|love|enjoy|eat|drink) (.+)$`), "{S} does not $1 $2"},
	{regexp.MustCompile(lead + `i(?:'ve got| have got| have| own) ((?:a|an|two|three|four|five|\d+) .+)$`), "{S} has $1"},
	{regexp.MustCompile(lead + `my (.+?) (is|are|has|have) (.+)$`), "{S}'s $1 $2 $3"},
}

// transient marks a "my X is Y" statement about something happening now rather
// than a lasting attribute: "my sister is visiting next week".
var transient = regexp.MustCompile(`(?i)^(?:my .+? (?:is|are) )(?:\w+ing|about)\s+\S`)

// replacement is one word-level rewrite.
type replacement struct {
	re   *regexp.Regexp
	repl string
}

// secondPerson turns an assistant's statement about the user into the user's own
// words, so the first-person rules apply ("Your files have ..." → "My files have ...").
var secondPerson = []replacement{
	{regexp.MustCompile(`(?i)\byou're\b`), "I'm"},
	{regexp.MustCompile(`(?i)\byou've\b`), "I've"},
	{regexp.MustCompile(`(?i)\byour\b`), "my"},
	{regexp.MustCompile(`(?i)\byou\b`), "I"},
}

// possessives in the rest of a fact become third person ("with my wife" → "with
// their wife").
var possessives = []replacement{
	{regexp.MustCompile(`(?i)\bmyself\b`), "themselves"},
	{regexp.MustCompile(`(?i)\bmy\b`), "their"},
	{regexp.MustCompile(`(?i)\bmine\b`), "theirs"},
	{regexp.MustCompile(`(?i)\bme\b`), "them"},
}

// stableFact rewrites sentence, said by who, as a third-person fact when it
// states a stable attribute.
func stableFact(sentence, who string) (string, bool) {
	s := textnorm.SingleSpaced(textnorm.FoldQuotes(sentence))
	subject := who
	switch strings.ToLower(who) {
	case "", "user":
		subject = "User"
	case "assistant", "tool", "function":
		subject = "User"
		for _, r := range secondPerson {
			s = r.re.ReplaceAllString(s, r.repl)
		}
	}
	if transient.MatchString(s) {
		return "", false
	}
	for _, r := range factRules {
		m := r.re.FindStringSubmatchIndex(s)
		if m == nil {
			continue
		}
		tmpl := strings.ReplaceAll(r.tmpl, "{S}", strings.ReplaceAll(subject, "$", "$$"))
		f := string(r.re.ExpandString(nil, tmpl, s, m))
		head, rest, _ := strings.Cut(f, " ")
		for _, p := range possessives {
			rest = p.re.ReplaceAllString(rest, p.repl)
		}
		return cleanStatement(head + " " + rest), true
	}
	return "", false
}
