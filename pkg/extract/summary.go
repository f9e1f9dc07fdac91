package extract

import (
	"regexp"
	"strings"
	"unicode/utf8"

	// Named so: this package's rules call a conversation being read a session.
	sessionstate "github.com/agentmem/agentmem/pkg/session"
)

// decisionRe finds sentences that settle something: a decision, an agreement or a
// plan ("Let's use the March file", "We decided to drop column F").
var decisionRe = regexp.MustCompile(`(?i)\b(?:decided|decide to|agreed|agree to|let'?s|we(?:'ll| will| should)|i(?:'ll| will)|going to|chose|chosen|settled on|from now on|instead)\b`)

// maxKeyPointBytes bounds a sentence that can be a key point: a longer one is a
// paste or a run-on text, not a point, and running every rule over it made the
// summary of a session holding such messages take seconds.
const maxKeyPointBytes = 1000

// SummarizeSession is Summarize over a session's messages (session.State.Recent),
// the retriever's Summarizer.
func SummarizeSession(msgs []sessionstate.Message, maxChars int) string {
	conv := make([]Message, len(msgs))
	for i, m := range msgs {
		conv[i] = Message{Role: string(m.Role), Text: m.Text, TS: m.TS, EventID: m.EventID}
	}
	return Summarize(conv, maxChars)
}

// Summarize is the offline session summariser: a deterministic digest of a
// conversation (oldest message first) in at most maxChars runes (maxChars <= 0: no
// bound). It has three parts, each left out when there is nothing for it:
//
//	Request: the first human message (any role but assistant, tool and system)
//	Key points:
//	- each sentence (up to maxKeyPointBytes) of a human message that states a preference, asks to be
//	  remembered, describes a file's structure, or records a decision, in
//	  conversation order, repeats (ignoring case and spacing) dropped
//	Outcome: the last assistant message
//
// Request and Outcome are each cut to a quarter of maxChars (with "…"); the key
// points fill what is left, in order, and the first one that does not fit ends the
// list. Code blocks are never key points.
func Summarize(conv []Message, maxChars int) string {
	var (
		request, outcome string
		points           []string
		seen             = map[string]bool{}
	)
	for _, m := range conv {
		text := strings.Join(strings.Fields(m.Text), " ")
		if text == "" {
			continue
		}
		switch m.Role {
		case RoleSystem, RoleTool:
			continue
		case RoleAssistant:
			outcome = text
			continue
		}
		if request == "" {
			request = text
		}
		for _, sent := range sentences(m.Text) {
			st := stripFiller(sent.text)
			if sent.code || len(st) > maxKeyPointBytes || !keyStatement(st) {
				continue
			}
			st = strings.Join(strings.Fields(st), " ")
			if key := strings.ToLower(st); !seen[key] {
				seen[key] = true
				points = append(points, st)
			}
		}
	}
	partMax := 0
	if maxChars > 0 {
		partMax = max(maxChars/4, 1)
	}
	var head, tail string
	if request != "" {
		head = "Request: " + bound(request, partMax) + "\n"
	}
	if outcome != "" {
		tail = "Outcome: " + bound(outcome, partMax) + "\n"
	}
	used := utf8.RuneCountInString(head) + utf8.RuneCountInString(tail)
	var b strings.Builder
	b.WriteString(head)
	for i, p := range points {
		line := "- " + p + "\n"
		if i == 0 {
			line = "Key points:\n" + line
		}
		n := utf8.RuneCountInString(line)
		if maxChars > 0 && used+n > maxChars {
			break
		}
		used += n
		b.WriteString(line)
	}
	b.WriteString(tail)
	out := strings.TrimSuffix(b.String(), "\n")
	if maxChars > 0 {
		out = bound(out, maxChars) // only when the fixed parts alone overflow a tiny bound
	}
	return out
}

// keyStatement reports whether a sentence of a human message is worth a key point.
func keyStatement(s string) bool {
	if isPreference(s) || len(fileFactsIn(s)) > 0 || (decisionRe.MatchString(s) && !isQuestion(s)) {
		return true
	}
	_, ok := remembered(s)
	return ok
}

// bound cuts s to at most n runes, "…" included when cut; n <= 0 keeps s.
func bound(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}
