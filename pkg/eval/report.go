package eval

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// System names in a Report, in the order Run scores them.
const (
	SystemAgentmem   = "agentmem"
	SystemBM25Turns  = "bm25-turns"
	SystemMemoryFile = "memory-md-chunks"
	SystemDragon     = "paper-dragon"
)

var systemNames = []string{SystemAgentmem, SystemBM25Turns, SystemMemoryFile}

// PaperDragon is the paper's anchor (Maharana et al. 2024, Table 3: the DRAGON dense
// retriever over raw dialog turns, all categories), recall in percent by k.
var PaperDragon = map[int]float64{5: 58.8, 10: 67.5, 25: 79.9, 50: 84.8}

// SystemReport is one system's evidence recall, in percent, keyed by k written in
// decimal ("10").
type SystemReport struct {
	Name string `json:"name"`
	// Recall is the mean over the questions of categories 1–4 with usable evidence;
	// adversarial questions (5) are excluded here and reported in PerCategory only.
	Recall map[string]float64 `json:"recall"`
	// PerCategory is keyed by category name (multi-hop, temporal, open-domain,
	// single-hop, adversarial).
	PerCategory map[string]map[string]float64 `json:"per_category,omitempty"`
	// ItemTokensMean is the mean estimated tokens of the first k items (their texts
	// alone, without the rest of a pack), over the same questions as Recall.
	ItemTokensMean map[string]float64 `json:"item_tokens_mean,omitempty"`
	// ItemsMean is the mean number of items returned (at most the largest k, for
	// agentmem the pack's vector memories and chunks).
	ItemsMean float64 `json:"items_mean,omitempty"`
	// RecallAtTokens is the recall of the first items whose texts add up to at
	// most the budget (RecallAtTokens), keyed by budget in decimal ("2000"): the
	// systems compared at equal tokens rather than equal k. Same questions as
	// Recall.
	RecallAtTokens map[string]float64 `json:"recall_at_tokens,omitempty"`
}

// QuestionCounts counts the questions of a run.
type QuestionCounts struct {
	Total       int            `json:"total"`
	PerCategory map[string]int `json:"per_category"`
	// Scored are the questions of categories 1–4 with usable evidence (Recall's mean).
	Scored int `json:"scored"`
	// ScoredAdversarial are the category 5 questions with usable evidence.
	ScoredAdversarial int `json:"scored_adversarial"`
	// NoEvidence are questions left with no usable evidence id, excluded everywhere.
	NoEvidence int `json:"no_evidence"`
}

// Report is the result of a run. Token counts use the retriever's estimate (runes /
// 4, rounded up): a pack's token_estimate is that of its rendered prompt, and a
// conversation's is that of its transcript, one "Speaker: text" line per turn.
type Report struct {
	// Embedder names the stack's embedder (embed.Embedder.Name) and Fusion how
	// its recall combines keyword and dense rankings (vector.fusion; "keyword
	// only" with the lexical local embedder): recall depends on both.
	Embedder      string         `json:"embedder"`
	Fusion        string         `json:"fusion"`
	Ks            []int          `json:"ks"`
	Systems       []SystemReport `json:"systems"`
	Anchor        SystemReport   `json:"anchor"`
	Conversations int            `json:"conversations"`
	Sessions      int            `json:"sessions"`
	// UndatedSessions had a date that could not be parsed (see Session.Start).
	UndatedSessions int            `json:"undated_sessions"`
	Turns           int            `json:"turns"`
	Questions       QuestionCounts `json:"questions"`
	Evidence        EvidenceStats  `json:"evidence"`
	// TokenBudgets are the budgets of SystemReport.RecallAtTokens.
	TokenBudgets []int `json:"token_budgets"`
	// DefaultBudgetTokens is the retriever's default budget in the run
	// (memory.context_budget_tokens, memory.context_budget_percent).
	DefaultBudgetTokens int `json:"default_budget_tokens"`
	// DefaultPack is agentmem's recall with the pack as returned with the default
	// budget (what an agent gets without max_tokens); its recall at a k past the
	// items the budget holds is that of the items held.
	DefaultPack SystemReport `json:"default_pack"`
	// ContextTokensMean is the mean token_estimate of agentmem's packs with the
	// default budget, over every question asked.
	ContextTokensMean float64 `json:"context_tokens_mean"`
	// ConversationTokensMean is the mean conversation length in tokens, over the
	// questions asked (so it weighs conversations as ContextTokensMean does).
	ConversationTokensMean float64 `json:"conversation_tokens_mean"`
	// ContextShareMean is the mean, over the questions, of the default pack's tokens
	// divided by the conversation's tokens, in percent.
	ContextShareMean float64 `json:"context_share_percent_mean"`
	// ContextTokensAtK and ContextShareAtK are the same for the pack an agent gets
	// when it asks for k memories: the pack less its ranked items after the k-th
	// (PackTokensAtK), keyed by k in decimal. The run asks for the largest k
	// without a budget, so that recall@k is defined for every k; a recall@10 is
	// paid for with the pack at 10, not with the one at 50.
	ContextTokensAtK map[string]float64 `json:"context_tokens_at_k"`
	ContextShareAtK  map[string]float64 `json:"context_share_percent_at_k"`
	// StoredTurnsPercent is the share of turns that some episodic or semantic memory
	// names in its provenance: what the write decision and extraction kept.
	StoredTurnsPercent float64 `json:"stored_turns_percent"`
	// EvidenceStoredPercent is, over the questions of categories 1–4, the mean share
	// of evidence turns kept in some memory: the ceiling of agentmem's recall at any k.
	EvidenceStoredPercent float64 `json:"evidence_stored_percent"`
	// Compression is long-term compression's effect on the users' MEMORY.md,
	// SessionSummaries the weight of the sessions' summaries.
	Compression      CompressionStats `json:"compression"`
	SessionSummaries SummaryStats     `json:"session_summaries"`
	ReplaySeconds    float64          `json:"replay_seconds"`
	QuestionSeconds  float64          `json:"question_seconds"`

	// PerQuestion has every question's recall, for analysis of misses; it is left
	// out of the JSON form, which stays a summary.
	PerQuestion []QuestionResult `json:"-"`

	acc         []accumulator // per system
	defaultAcc  accumulator   // agentmem with the default budget
	budgets     []int
	storedTurns int
	coverage    float64
	ctx         struct{ tokens, conv, share float64 }
	ctxAtK      []struct{ tokens, share float64 } // by k index
}

// QuestionResult is one question's outcome.
type QuestionResult struct {
	SampleID string
	Question string
	Category Category
	// Evidence are the usable evidence ids; none means the question was not scored.
	Evidence []string
	// Recall is by system name, then by index of Ks.
	Recall map[string][]float64
}

// accumulator sums one system's per-question values.
type accumulator struct {
	recall   map[Category][]float64 // by category, by k index
	tokens   []float64              // categories 1–4, by k index
	n        map[Category]int
	items    float64
	atTokens []float64 // categories 1–4, by budget index
}

func newAccumulator(ks, budgets int) accumulator {
	return accumulator{recall: map[Category][]float64{}, tokens: make([]float64, ks), n: map[Category]int{}, atTokens: make([]float64, budgets)}
}

func newReport(ks, budgets []int, convs []Conversation) *Report {
	r := &Report{Ks: ks, TokenBudgets: budgets, budgets: budgets, Conversations: len(convs), Questions: QuestionCounts{PerCategory: map[string]int{}}}
	for _, c := range convs {
		r.Sessions += len(c.Sessions)
		for _, s := range c.Sessions {
			r.Turns += len(s.Turns)
			if !s.DateParsed {
				r.UndatedSessions++
			}
		}
	}
	r.ctxAtK = make([]struct{ tokens, share float64 }, len(ks))
	r.acc = make([]accumulator, len(systemNames))
	for i := range r.acc {
		r.acc[i] = newAccumulator(len(ks), len(budgets))
	}
	r.defaultAcc = newAccumulator(len(ks), len(budgets))
	return r
}

// add scores one question: results holds each system's items, in systemNames order.
func (r *Report) add(sample string, q Question, evidence []string, st EvidenceStats, results [][]Item, packTokens, convTokens int) {
	cat := q.Category
	qr := QuestionResult{SampleID: sample, Question: q.Text, Category: cat, Evidence: evidence, Recall: map[string][]float64{}}
	defer func() { r.PerQuestion = append(r.PerQuestion, qr) }()
	r.Questions.Total++
	r.Questions.PerCategory[cat.String()]++
	r.Evidence.Add(st)
	r.ctx.conv += float64(convTokens)
	for ki, k := range r.Ks {
		atK := PackTokensAtK(packTokens, results[0], k)
		r.ctxAtK[ki].tokens += float64(atK)
		if convTokens > 0 {
			r.ctxAtK[ki].share += float64(atK) / float64(convTokens)
		}
	}
	if len(evidence) == 0 {
		r.Questions.NoEvidence++
		return
	}
	if cat == Adversarial {
		r.Questions.ScoredAdversarial++
	} else {
		r.Questions.Scored++
	}
	for si, items := range results {
		qr.Recall[systemNames[si]] = r.acc[si].add(r.Ks, cat, evidence, items)
	}
}

// add scores one question's items at every k and returns its recall by k index.
func (a *accumulator) add(ks []int, cat Category, evidence []string, items []Item) []float64 {
	if a.recall[cat] == nil {
		a.recall[cat] = make([]float64, len(ks))
	}
	a.n[cat]++
	out := make([]float64, len(ks))
	for ki, k := range ks {
		rec, _ := RecallAtK(evidence, items, k)
		out[ki] = rec
		a.recall[cat][ki] += rec
		if cat != Adversarial {
			for _, it := range items[:min(k, len(items))] {
				a.tokens[ki] += float64(it.Tokens)
			}
		}
	}
	a.items += float64(len(items))
	return out
}

// addBudgeted scores one question with the default-budget pack (its items and
// token estimate) and every system at equal tokens: long holds each system's
// items in systemNames order, enough of them for the largest budget.
func (r *Report) addBudgeted(cat Category, evidence []string, packItems []Item, packTokens, convTokens int, long [][]Item) {
	r.ctx.tokens += float64(packTokens)
	if convTokens > 0 {
		r.ctx.share += float64(packTokens) / float64(convTokens)
	}
	if len(evidence) == 0 {
		return
	}
	r.defaultAcc.add(r.Ks, cat, evidence, packItems)
	if cat == Adversarial {
		return
	}
	for si, items := range long {
		for bi, b := range r.budgets {
			rec, _ := RecallAtTokens(evidence, items, b)
			r.acc[si].atTokens[bi] += rec
		}
	}
	for bi, b := range r.budgets {
		rec, _ := RecallAtTokens(evidence, packItems, b)
		r.defaultAcc.atTokens[bi] += rec
	}
}

// addCoverage adds the share of a scored question's evidence that stored holds.
func (r *Report) addCoverage(cat Category, evidence []string, stored map[string]bool) {
	if cat == Adversarial || len(evidence) == 0 {
		return
	}
	n := 0
	for _, id := range evidence {
		if stored[id] {
			n++
		}
	}
	r.coverage += float64(n) / float64(len(evidence))
}

// finish turns the sums into the exported means.
func (r *Report) finish() {
	r.Systems = nil
	for si, a := range r.acc {
		r.Systems = append(r.Systems, a.report(systemNames[si], r.Ks, r.budgets, r.Questions.Scored+r.Questions.ScoredAdversarial))
	}
	r.DefaultPack = r.defaultAcc.report(SystemAgentmem+"-default-budget", r.Ks, r.budgets, r.Questions.Scored+r.Questions.ScoredAdversarial)
	r.Anchor = SystemReport{Name: SystemDragon, Recall: map[string]float64{}}
	for _, k := range r.Ks {
		if v, ok := PaperDragon[k]; ok {
			r.Anchor.Recall[strconv.Itoa(k)] = v
		}
	}
	r.ContextTokensMean = mean(r.ctx.tokens, r.Questions.Total)
	r.ConversationTokensMean = mean(r.ctx.conv, r.Questions.Total)
	r.ContextShareMean = pct(r.ctx.share, r.Questions.Total)
	r.ContextTokensAtK, r.ContextShareAtK = map[string]float64{}, map[string]float64{}
	for ki, k := range r.Ks {
		r.ContextTokensAtK[strconv.Itoa(k)] = mean(r.ctxAtK[ki].tokens, r.Questions.Total)
		r.ContextShareAtK[strconv.Itoa(k)] = pct(r.ctxAtK[ki].share, r.Questions.Total)
	}
	r.StoredTurnsPercent = pct(float64(r.storedTurns), r.Turns)
	r.EvidenceStoredPercent = pct(r.coverage, r.Questions.Scored)
}

// report turns one system's sums into its SystemReport; questions is the number
// of scored questions of every category (ItemsMean's).
func (a accumulator) report(name string, ks, budgets []int, questions int) SystemReport {
	sr := SystemReport{Name: name, Recall: map[string]float64{}, PerCategory: map[string]map[string]float64{}, ItemTokensMean: map[string]float64{}, RecallAtTokens: map[string]float64{}}
	scored := 0
	for c, n := range a.n {
		if c != Adversarial {
			scored += n
		}
	}
	for ki, k := range ks {
		key := strconv.Itoa(k)
		overall := 0.0
		for c, sums := range a.recall {
			if c != Adversarial {
				overall += sums[ki]
			}
		}
		sr.Recall[key] = pct(overall, scored)
		sr.ItemTokensMean[key] = mean(a.tokens[ki], scored)
		for c, sums := range a.recall {
			if sr.PerCategory[c.String()] == nil {
				sr.PerCategory[c.String()] = map[string]float64{}
			}
			sr.PerCategory[c.String()][key] = pct(sums[ki], a.n[c])
		}
	}
	for bi, b := range budgets {
		sr.RecallAtTokens[strconv.Itoa(b)] = pct(a.atTokens[bi], scored)
	}
	sr.ItemsMean = mean(a.items, questions)
	return sr
}

// pct is sum/n in percent, rounded to a tenth; 0 without n.
func pct(sum float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return round1(100 * sum / float64(n))
}

// mean is sum/n rounded to a tenth; 0 without n.
func mean(sum float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return round1(sum / float64(n))
}

func round1(v float64) float64 {
	return float64(int64(v*10+0.5)) / 10
}

// WriteTable writes the report as text tables: overall recall@k per system beside
// the paper's anchor, then recall@k per category, then counts and tokens.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := func(first string) {
		fmt.Fprintf(tw, "%s\t", first)
		for _, k := range r.Ks {
			fmt.Fprintf(tw, "R@%d\t", k)
		}
		fmt.Fprintln(tw)
	}
	row := func(name string, vals map[string]float64) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, k := range r.Ks {
			if v, ok := vals[strconv.Itoa(k)]; ok {
				fmt.Fprintf(tw, "%.1f\t", v)
			} else {
				fmt.Fprintf(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "Evidence recall (%%), categories 1-4, %d questions (adversarial excluded)\n", r.Questions.Scored)
	header("system")
	for _, s := range r.Systems {
		row(s.Name, s.Recall)
	}
	row(r.Anchor.Name+" (paper)", r.Anchor.Recall)
	for _, c := range Categories {
		n := r.Questions.PerCategory[c.String()]
		if n == 0 {
			continue
		}
		fmt.Fprintf(tw, "\nCategory %d %s (%d questions)\n", int(c), c, n)
		header("system")
		for _, s := range r.Systems {
			row(s.Name, s.PerCategory[c.String()])
		}
	}
	fmt.Fprintf(tw, "\nTokens of the first k items (mean)\n")
	header("system")
	for _, s := range r.Systems {
		row(s.Name, s.ItemTokensMean)
	}
	fmt.Fprintf(tw, "\nRecall (%%) at equal tokens: the first items within the budget\n")
	fmt.Fprintf(tw, "system\t")
	for _, b := range r.TokenBudgets {
		fmt.Fprintf(tw, "%d tok\t", b)
	}
	fmt.Fprintln(tw)
	for _, s := range append(slices.Clone(r.Systems), r.DefaultPack) {
		fmt.Fprintf(tw, "%s\t", s.Name)
		for _, b := range r.TokenBudgets {
			fmt.Fprintf(tw, "%.1f\t", s.RecallAtTokens[strconv.Itoa(b)])
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "\nDefault budget (%d tokens): the pack as returned\n", r.DefaultBudgetTokens)
	header("system")
	row(r.DefaultPack.Name, r.DefaultPack.Recall)
	if err := tw.Flush(); err != nil {
		return err
	}
	e := r.Evidence
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d conversations, %d sessions (%d undated), %d turns, %d questions; %d without usable evidence (excluded)\n",
		r.Conversations, r.Sessions, r.UndatedSessions, r.Turns, r.Questions.Total, r.Questions.NoEvidence)
	fmt.Fprintf(&b, "evidence: %d ids; %d joined strings split, %d repaired, %d bare \"D\", %d malformed, %d unknown turns, %d duplicates\n",
		e.IDs, e.Joined, e.Repaired, e.Bare, e.Malformed, e.Unknown, e.Duplicate)
	fmt.Fprintf(&b, "context with the default budget of %d tokens: %.1f tokens per pack (mean), conversation %.1f tokens (mean), pack = %.1f%% of the conversation (mean)\n",
		r.DefaultBudgetTokens, r.ContextTokensMean, r.ConversationTokensMean, r.ContextShareMean)
	b.WriteString("context of the unbudgeted pack trimmed to k memories:")
	for _, k := range r.Ks {
		key := strconv.Itoa(k)
		fmt.Fprintf(&b, " k=%d %.1f tokens (%.1f%%)", k, r.ContextTokensAtK[key], r.ContextShareAtK[key])
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "agentmem kept %.1f%% of the turns in some memory; %.1f%% of the evidence is kept (the ceiling of its recall)\n",
		r.StoredTurnsPercent, r.EvidenceStoredPercent)
	c := r.Compression
	fmt.Fprintf(&b, "long-term compression (dry run): %d MEMORY.md files, %d -> %d chars (ratio %.3f), %d rejected by the loss guard\n",
		c.Files, c.BeforeChars, c.AfterChars, c.Ratio, c.Rejections)
	ss := r.SessionSummaries
	fmt.Fprintf(&b, "session summaries: %d sessions; summary %.1f%% of the tokens of the messages it stands for; summary + verbatim messages %.1f%% of the session\n",
		ss.Sessions, ss.SummarySharePercent, ss.PackSharePercent)
	fmt.Fprintf(&b, "time: replay and consolidation %.1fs, questions %.1fs\n", r.ReplaySeconds, r.QuestionSeconds)
	_, err := io.WriteString(w, b.String())
	return err
}
