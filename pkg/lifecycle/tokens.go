package lifecycle

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// keyTokenRE finds what a compression must not lose (SPEC B4): dates, file
// names, identifiers, numbers and names, in that order of precedence.
var keyTokenRE = regexp.MustCompile(
	`\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?` + // ISO dates and times
		`|\d{1,2}/\d{1,2}/\d{2,4}` + // 1/15/2025
		`|\b[\w-]+\.(?:md|txt|csv|xlsx?|json|ya?ml|go|py|js|ts|pdf|docx?|log|sql|sh|html?|xml|toml|ini|conf|png|jpe?g|zip|tar|gz)\b` + // file names
		"|`[^`\\n]+`" + // code spans
		`|\b[A-Za-z]+[A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b` + // snake_case
		`|\b[a-z]+[A-Z][A-Za-z0-9]*\b` + // camelCase
		`|\b[A-Za-z]+\d[A-Za-z0-9]*\b` + // v2, gpt4o
		`|\d+(?:[.,]\d+)*%?` + // numbers
		`|\b[A-Z][a-zA-Z'’]+\b`) // names (capitalised words not in commonWords)

// commonWords are capitalised words that start sentences rather than name
// anything; they are not key tokens.
var commonWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and the this that these those it its he she they we you i me my our your their his her
		is are was were be been has have had do does did will would can could should may might must shall
		if then else when while where what which who whom whose why how not no yes also but or so for of in on at to
		from by with as about after before during since until into over under again all any each every some such
		there here now today yesterday tomorrow user users assistant please thanks thank ok okay note remember
		prefers prefer likes like uses use wants want asked asks said says fixed fix error errors solution
		file files column columns row rows general session sessions summary memory`) {
		m[w] = true
	}
	return m
}()

// KeyTokens returns the distinct key tokens of text: dates, numbers, names, file
// names and identifiers.
func KeyTokens(text string) map[string]bool {
	out := map[string]bool{}
	for _, t := range keyTokenRE.FindAllString(text, -1) {
		if t[0] >= 'A' && t[0] <= 'Z' && commonWords[strings.ToLower(t)] {
			continue
		}
		out[t] = true
	}
	return out
}

// GuardConfig bounds what a compression may lose.
type GuardConfig struct {
	// MaxLossPercent is the share of the file's distinct key tokens a compression
	// may drop; 0 (the default) drops none.
	MaxLossPercent int
}

// Check is the loss guard of SPEC B4: it returns an error wrapping ErrRejected
// and naming what was lost when after (the compressed file) drops more of
// before's distinct key tokens than allowed, or is longer than before. Entry
// header lines are left out of the count: their stamps are the entries' own,
// and merging duplicates drops the older header.
func (g GuardConfig) Check(before, after string) error {
	if len(after) > len(before) {
		return fmt.Errorf("%w: the compressed file is longer (%d > %d chars)", ErrRejected, len(after), len(before))
	}
	if strings.TrimSpace(after) == "" && strings.TrimSpace(before) != "" {
		return fmt.Errorf("%w: the compressed file is empty", ErrRejected)
	}
	body := bodyText(after)
	was, now := KeyTokens(bodyText(before)), KeyTokens(body)
	lower := strings.ToLower(body)
	var lost []string
	for t := range was {
		if !now[t] && !holdsWord(lower, strings.ToLower(t)) {
			lost = append(lost, t)
		}
	}
	if len(lost) == 0 || len(lost)*100 <= g.MaxLossPercent*len(was) {
		return nil
	}
	sort.Strings(lost)
	shown := lost
	if len(shown) > 10 {
		shown = shown[:10]
	}
	return fmt.Errorf("%w: %d of %d distinct key tokens lost (allowed %d%%): %s", ErrRejected, len(lost), len(was), g.MaxLossPercent, strings.Join(shown, ", "))
}

// bodyText is doc without its entry header lines.
func bodyText(doc string) string {
	var b strings.Builder
	for line := range strings.Lines(doc) {
		if strings.HasPrefix(line, "### [") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// holdsWord reports whether lower (lower-cased text) holds the lower-cased
// token as a whole word: a name that now starts no sentence ("Sales files" →
// "sales files") is still there.
func holdsWord(lower, token string) bool {
	for i := 0; ; {
		j := strings.Index(lower[i:], token)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(token)
		if (start == 0 || !isWordByte(lower[start-1])) && (end == len(lower) || !isWordByte(lower[end])) {
			return true
		}
		i = start + 1
	}
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 0x80
}

// heldBy reports whether every key token of tokens is in text, as the guard
// sees it: one of text's key tokens, or a whole word of it (holdsWord). The
// first matters: a token holdsWord does not see as a word ("0" of "0xfc", a
// name next to CJK text) would keep an entry from merging with its own repeat.
func heldBy(tokens map[string]bool, text string) bool {
	now := KeyTokens(text)
	lower := strings.ToLower(text)
	for t := range tokens {
		if !now[t] && !holdsWord(lower, strings.ToLower(t)) {
			return false
		}
	}
	return true
}
