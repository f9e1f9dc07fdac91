package consolidate

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/processor"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Reconsolidation without drift (issue 22). A memory used in context packs is
// rewritten for its new context, but:
//
//   - every rewrite starts from the memory's base text (records.MetaBaseText: the
//     text before any reconsolidation), never from the previous rewrite, so
//     rewrites do not stack into a model's rewrite of its own rewrite;
//   - the statement (records.MetaThing) is never rewritten by reconsolidation;
//   - a rewrite that loses a number, date or named entity of the statement is
//     rejected: the text stays as it is (ErrRewriteLosesFacts, logged and counted);
//   - the context packs of one session reconsolidate a memory at most once, and
//     packs without a session at most once per DefaultReconsolidateWindow
//     (planHits).

// ErrRewriteLosesFacts reports a reconsolidation rewrite that dropped a number,
// date or named entity of the statement; the original text is kept.
var ErrRewriteLosesFacts = errors.New("consolidate: rewrite loses facts of the statement")

// DefaultReconsolidateWindow is how long after a reconsolidation a context pack
// without a session does not reconsolidate the memory again.
const DefaultReconsolidateWindow = time.Hour

// DefaultMaxReconsolidations is RunnerConfig.MaxReconsolidations' default: 16
// rewrites of a 300 ms model take about 5 s, well within the consolidator's 30 s
// handler deadline even behind other steps' calls.
const DefaultMaxReconsolidations = 16

// baseText is the text a reconsolidation of rec rewrites from.
func baseText(rec vectorstore.Record) string {
	if s, ok := rec.Metadata[records.MetaBaseText].(string); ok && s != "" {
		return s
	}
	return rec.Text
}

// rewriteFromBase asks r to reconsolidate rec for newContext from its base text
// and checks the rewrite keeps the statement's anchors. The error wraps
// ErrRewriteLosesFacts for a rejected rewrite.
func rewriteFromBase(ctx context.Context, r processor.Reconsolidator, rec vectorstore.Record, newContext string) (processor.Rewrite, error) {
	base := rec
	base.Text = baseText(rec)
	rw, err := r.Reconsolidate(ctx, base, newContext)
	if err != nil {
		return processor.Rewrite{}, err
	}
	if lost := lostAnchors(statementOf(rec), base.Text, rw.Text); len(lost) > 0 {
		return processor.Rewrite{}, fmt.Errorf("%w: %q missing", ErrRewriteLosesFacts, lost)
	}
	return rw, nil
}

// reconsolidationPatch is the patch of rec's reconsolidation for newContext at
// now, rw being the reconsolidator's rewrite (SPEC C5): newContext becomes
// the record's context and an updates entry keeps the text and context it had.
// The text (then its base text too, what later rewrites start from) is in the
// patch only when a model rewrote it: the offline reconsolidator keeps it as it
// is, so a read writes nothing into a memory that the user did not say. A
// rewrite the rules made in the model's place marks the record (processed_by).
func reconsolidationPatch(rec vectorstore.Record, rw processor.Rewrite, newContext string, now time.Time) vectorstore.Patch {
	p := vectorstore.Patch{Metadata: map[string]any{
		records.MetaContext: newContext,
		records.MetaUpdates: records.AppendContextUpdate(rec, now, newContext),
	}}
	markProcessedBy(p.Metadata, rw)
	if text := rw.Text; text != rec.Text {
		p.Text = &text
		p.Metadata[records.MetaBaseText] = baseText(rec)
	}
	return p
}

// reconsolidatedIn is the bookkeeping metadata of a reconsolidation of rec at
// now for a pack of session (a session key, "" for none), which mayReconsolidate
// reads.
func reconsolidatedIn(rec vectorstore.Record, now time.Time, session string) map[string]any {
	md := map[string]any{records.MetaReconsolidatedAt: records.FormatTime(now)}
	if session != "" {
		sessions := append(records.StringList(rec.Metadata[records.MetaReconsolidatedSessions]), session)
		if len(sessions) > HitEventWindow {
			sessions = sessions[len(sessions)-HitEventWindow:]
		}
		md[records.MetaReconsolidatedSessions] = records.ToAnyList(sessions)
	}
	return md
}

// mayReconsolidate reports whether a context pack of session (a session key,
// empty for none) at now may reconsolidate rec: not when a pack of the same
// session already did, nor, without a session, within window of the last one.
func mayReconsolidate(rec vectorstore.Record, session string, now time.Time, window time.Duration) bool {
	if session != "" {
		return !slices.Contains(records.StringList(rec.Metadata[records.MetaReconsolidatedSessions]), session)
	}
	last, ok := rec.Metadata[records.MetaReconsolidatedAt].(string)
	if !ok {
		return true
	}
	t, err := time.Parse(time.RFC3339Nano, last)
	return err != nil || now.Sub(t) >= window
}

// statementOf is rec's statement: metadata thing, else its base text.
func statementOf(rec vectorstore.Record) string {
	if s, ok := rec.Metadata[records.MetaThing].(string); ok && strings.TrimSpace(s) != "" {
		return s
	}
	return baseText(rec)
}

var (
	// anchorToken is a word of a text: letters, digits and the separators of
	// numbers, dates and times inside it.
	anchorToken = regexp.MustCompile(`[\p{L}\p{N}]+(?:[.,:/'’-][\p{L}\p{N}]+)*`)
	// calendarWords are dates however they are capitalised.
	calendarWords = map[string]bool{
		"january": true, "february": true, "march": true, "april": true, "may": true, "june": true,
		"july": true, "august": true, "september": true, "october": true, "november": true, "december": true,
		"monday": true, "tuesday": true, "wednesday": true, "thursday": true, "friday": true,
		"saturday": true, "sunday": true, "today": true, "yesterday": true, "tomorrow": true,
	}
	// sentenceStarters are capitalised words that name nothing.
	sentenceStarters = map[string]bool{"i": true, "i'm": true, "i've": true, "i'll": true, "i'd": true}
)

// anchors are the words of text a faithful rewrite must keep: numbers (any word
// with a digit: amounts, dates, times, versions), calendar words, and named
// entities (capitalised words not opening a sentence), lower-cased.
func anchors(text string) []string {
	var out []string
	sentenceStart := true
	for _, loc := range anchorToken.FindAllStringIndex(text, -1) {
		w := text[loc[0]:loc[1]]
		lw := strings.ToLower(w)
		isAnchor := strings.ContainsFunc(w, unicode.IsDigit) || calendarWords[lw] ||
			(!sentenceStart && unicode.IsUpper([]rune(w)[0]) && !sentenceStarters[lw])
		if isAnchor && !slices.Contains(out, lw) {
			out = append(out, lw)
		}
		rest := strings.TrimSpace(text[loc[1]:min(len(text), loc[1]+2)])
		sentenceStart = strings.HasPrefix(rest, ".") || strings.HasPrefix(rest, "!") || strings.HasPrefix(rest, "?") || strings.HasPrefix(rest, ":")
	}
	return out
}

// lostAnchors returns the anchors of statement that base also holds and rewrite
// does not (compared as lower-case words).
func lostAnchors(statement, base, rewrite string) []string {
	have := make(map[string]bool)
	for _, loc := range anchorToken.FindAllString(rewrite, -1) {
		have[strings.ToLower(loc)] = true
	}
	inBase := make(map[string]bool)
	for _, w := range anchorToken.FindAllString(base, -1) {
		inBase[strings.ToLower(w)] = true
	}
	var lost []string
	for _, a := range anchors(statement) {
		if inBase[a] && !have[a] {
			lost = append(lost, a)
		}
	}
	return lost
}

// Outcomes of a reconsolidation, the label of agentmem_reconsolidations_total.
const (
	outcomeRewritten = "rewritten"
	// outcomeContext: the memory took the new context and kept its text (the
	// offline reconsolidator, or a model that kept it).
	outcomeContext  = "context"
	outcomeRejected = "rejected"
	outcomeSkipped  = "skipped"
	// outcomeShed: the batch of hits had spent its MaxReconsolidations; the memory
	// keeps its text and is reconsolidated by a later use.
	outcomeShed = "shed"
)

// runnerMetrics counts reconsolidations by outcome and the namespace leases
// lost; the zero value counts nothing.
type runnerMetrics struct {
	outcomes   *prometheus.CounterVec
	leasesLost prometheus.Counter
}

func newRunnerMetrics(reg prometheus.Registerer) (runnerMetrics, error) {
	if reg == nil {
		return runnerMetrics{}, nil
	}
	c, err := obs.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "agentmem",
		Name:      "reconsolidations_total",
		Help:      "Reconsolidations of used episodic memories: rewritten (a model rewrote the text), context (it took the new context and kept its text), rejected (the rewrite lost a number, date or entity of the statement), skipped (already done in the session or window) or shed (its batch of hits had asked the model for MaxReconsolidations rewrites already; a later use reconsolidates it).",
	}, []string{"outcome"}))
	if err != nil {
		return runnerMetrics{}, err
	}
	for _, o := range []string{outcomeRewritten, outcomeContext, outcomeRejected, outcomeSkipped, outcomeShed} {
		c.WithLabelValues(o)
	}
	lost, err := obs.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "agentmem",
		Name:      "leases_lost_total",
		Help:      "Namespace leases a replica lost while holding them (its renewals missed the TTL): its run stopped, and its work may have overlapped another replica's.",
	}))
	if err != nil {
		return runnerMetrics{}, err
	}
	return runnerMetrics{outcomes: c, leasesLost: lost}, nil
}

func (m runnerMetrics) reconsolidation(outcome string) {
	if m.outcomes != nil {
		m.outcomes.WithLabelValues(outcome).Inc()
	}
}

func (m runnerMetrics) leaseLost() {
	if m.leasesLost != nil {
		m.leasesLost.Inc()
	}
}
