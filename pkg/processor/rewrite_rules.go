package processor

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// RuleMerger is the offline merger: it keeps the more informative text and appends
// the sentences of the other that add something.
type RuleMerger struct{}

// NewRuleMerger returns the offline merger.
func NewRuleMerger() *RuleMerger { return &RuleMerger{} }

// Merge keeps the text with more content words (then the longer one, then a's)
// and appends each sentence of the other whose content words are not all in it
// already, so no sentence is repeated and nothing new is lost.
func (RuleMerger) Merge(_ context.Context, a, b vectorstore.Record) (Rewrite, error) {
	primary, other := recordText(a), recordText(b)
	pw, ow := words(primary), words(other)
	if cw, co := contentWords(ow), contentWords(pw); cw > co || (cw == co && len(other) > len(primary)) {
		primary, other, pw = other, primary, ow
	}
	have := make(map[string]bool, len(pw))
	for _, w := range pw {
		have[w] = true
	}
	parts := []string{strings.TrimSpace(primary)}
	for _, s := range splitSentences(other) {
		sw := words(s.text)
		news := false
		for _, w := range sw {
			if !stopWords[w] && !have[w] {
				news = true
			}
			have[w] = true
		}
		if !news {
			continue
		}
		text := s.text
		if s.question {
			text += "?"
		}
		parts = append(parts, cleanStatement(text))
	}
	return Rewrite{Text: strings.TrimSpace(strings.Join(parts, " "))}, nil
}

// RuleSeparator is the offline separator: it prefixes each text with its own time
// and chat ("On 2026-11-02 10:04 UTC in chat c1: ..."), so two similar memories
// read as two distinct events. When time and chat coincide too, the memory id is
// added. An earlier prefix is replaced, not stacked, so separating again is stable.
type RuleSeparator struct{}

// NewRuleSeparator returns the offline separator.
func NewRuleSeparator() *RuleSeparator { return &RuleSeparator{} }

// separatorPrefix matches a prefix the separator wrote before.
var separatorPrefix = regexp.MustCompile(`^On \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC(?: in chat [^:]*?)?(?:, memory [^:]*)?: `)

// Separate rewrites a and b with their own time and chat in front.
func (RuleSeparator) Separate(_ context.Context, a, b vectorstore.Record) (Rewrite, Rewrite, error) {
	pa, pb := situation(a), situation(b)
	if pa == pb {
		pa += ", memory " + a.ID
		pb += ", memory " + b.ID
	}
	ta := pa + ": " + separatorPrefix.ReplaceAllString(recordText(a), "")
	tb := pb + ": " + separatorPrefix.ReplaceAllString(recordText(b), "")
	if ta == tb {
		return Rewrite{}, Rewrite{}, fmt.Errorf("%w: cannot separate two memories with the same id, time, chat and text (id %q)", ErrInvalidInput, a.ID)
	}
	return Rewrite{Text: ta}, Rewrite{Text: tb}, nil
}

// situation is "On <time> in chat <chat>" for r.
func situation(r vectorstore.Record) string {
	s := "On " + r.TS.UTC().Format("2006-01-02 15:04") + " UTC"
	if r.ChatID != "" {
		s += " in chat " + strings.ReplaceAll(r.ChatID, ":", "")
	}
	return s
}

// RuleReconsolidator is the offline reconsolidator: it keeps the text as it is.
// Without a model nothing can say what a memory means in the context it was
// recalled for, and a read must never write into a memory what the user did not
// say (issue 28: a query appended to the text reached prompts, search and
// exports as if the user had said it). The new context is recorded beside the
// text, in the record's context and updates (consolidate.ApplyHits).
type RuleReconsolidator struct{}

// NewRuleReconsolidator returns the offline reconsolidator.
func NewRuleReconsolidator() *RuleReconsolidator { return &RuleReconsolidator{} }

// Reconsolidate returns m's text unchanged, whatever newContext is.
func (RuleReconsolidator) Reconsolidate(_ context.Context, m vectorstore.Record, _ string) (Rewrite, error) {
	return Rewrite{Text: recordText(m)}, nil
}
