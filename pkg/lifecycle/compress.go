package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/records"
)

// Sentinel errors; every returned error wraps one of them or a dependency's.
var (
	// ErrInvalidConfig marks a configuration that cannot work.
	ErrInvalidConfig = errors.New("lifecycle: invalid configuration")
	// ErrRejected marks a compressed MEMORY.md the loss guard refused, or a
	// policy proposal with a value out of bounds.
	ErrRejected = errors.New("lifecycle: rejected")
)

// Steps as pkg/llm meters them (llm.WithStep).
const (
	StepCompress  = "compress"
	StepSummarize = "summarize"
	StepReflect   = "reflect"
)

// Who did a step, as replies and logs say it: ByRulesFallback when the rules
// stood in for a configured model whose reply was unusable or which was
// unavailable.
const (
	ByLLM           = "llm"
	ByRules         = "rules"
	ByRulesFallback = records.ProcessedByRulesFallback
)

// fallenBack logs, once, and counts (agentmem_llm_calls_total{step,
// outcome="fallback"}) that step's rules stood in for model, which failed with
// err.
func fallenBack(model any, step string, log *zap.Logger, err error) {
	log.Warn("model reply unusable or model unavailable; the offline rules stand in",
		zap.String("step", step), zap.String("processed_by", ByRulesFallback), zap.Error(err))
	if m, ok := model.(interface{ client() *llm.Client }); ok && m.client() != nil {
		m.client().ObserveFallback(step)
	}
}

// Compressor shortens a whole MEMORY.md.
type Compressor interface {
	Compress(ctx context.Context, doc string) (string, error)
}

// RuleCompressor is the offline compressor (SPEC B4): it merges duplicate and
// near-duplicate entries, and long-term sections, keeping the newest of those
// that restate the same fact, and tightens white space. An older block is
// dropped only when a newer one of its kind (an entry of its category, or a
// section) holds every key token it has (KeyTokens; a section's heading date
// included), so it never loses a date, number, name, file name or identifier
// of an entry, and it never makes the file longer. Deterministic.
type RuleCompressor struct{}

// Compress implements Compressor.
func (RuleCompressor) Compress(_ context.Context, doc string) (string, error) {
	return CompressRules(doc), nil
}

// nearDuplicate is the word-set overlap (Jaccard) from which two entries of one
// category, or two sections, restate the same fact.
const nearDuplicate = 0.6

// CompressRules is RuleCompressor's function.
func CompressRules(doc string) string {
	pre, blocks := markdown.SplitBlocks(doc)
	type kept struct {
		norm  string
		words map[string]bool
		text  string
		kind  markdown.Category // "" for a section
	}
	drop := make([]bool, len(blocks))
	var newer []kept
	// Newest first: by position (blocks are appended in time order), then each
	// older block is compared with the newer ones kept. An entry compares its
	// content, under the header that stamps it; a section its whole text.
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if b.Malformed {
			continue
		}
		k := kept{text: b.Text}
		if b.IsEntry {
			k.text, k.kind = b.Entry.Content, b.Entry.Category
		}
		k.norm = normalize(k.text)
		k.words = wordSet(k.norm)
		tokens := KeyTokens(k.text)
		restated := slices.ContainsFunc(newer, func(n kept) bool {
			return n.kind == k.kind && (n.norm == k.norm || jaccard(n.words, k.words) >= nearDuplicate) && heldBy(tokens, n.text)
		})
		// An entry with text typed under its "---" stays: that text would go with it.
		if restated && (!b.IsEntry || trailerBlank(b)) {
			drop[i] = true
			continue
		}
		newer = append(newer, k)
	}
	var out strings.Builder
	out.WriteString(tighten(pre))
	for i, b := range blocks {
		if drop[i] {
			continue
		}
		text := b.Text
		if b.IsEntry && trailerBlank(b) {
			e := b.Entry
			e.Content = strings.TrimSpace(tighten(e.Content))
			text = markdown.FormatEntry(e)
		} else {
			text = tighten(text)
		}
		if out.Len() > 0 && !strings.HasSuffix(out.String(), "\n\n") {
			if !strings.HasSuffix(out.String(), "\n") {
				out.WriteByte('\n')
			}
			out.WriteByte('\n')
		}
		out.WriteString(strings.TrimRight(text, "\n") + "\n")
	}
	res := out.String()
	if len(res) > len(doc) {
		return doc
	}
	return res
}

// trailerBlank reports whether an entry block holds nothing after its "---"
// but blank lines (so that re-formatting it loses nothing typed under it).
func trailerBlank(b markdown.Block) bool {
	_, after, ok := strings.Cut(b.Text, "\n---")
	if !ok {
		return false
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimLeft(after, " \t\r"), "\n")) == ""
}

var (
	spaceRunRE   = regexp.MustCompile(`[ \t]+`)
	trailSpaceRE = regexp.MustCompile(`(?m)[ \t]+$`)
	blankRunRE   = regexp.MustCompile(`\n{3,}`)
	nonWordRE    = regexp.MustCompile(`[^\p{L}\p{N}]+`)
)

// tighten trims trailing white space on every line, collapses runs of spaces
// inside lines (not indentation) and runs of blank lines to one.
func tighten(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		indent := len(line) - len(strings.TrimLeft(line, " \t"))
		b.WriteString(line[:indent] + spaceRunRE.ReplaceAllString(line[indent:], " "))
	}
	return blankRunRE.ReplaceAllString(trailSpaceRE.ReplaceAllString(b.String(), ""), "\n\n")
}

func normalize(s string) string {
	return strings.TrimSpace(nonWordRE.ReplaceAllString(strings.ToLower(s), " "))
}

func wordSet(norm string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(norm) {
		m[w] = true
	}
	return m
}

func jaccard(a, b map[string]bool) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	inter := 0
	for w := range a {
		if b[w] {
			inter++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// LLMCompressor asks a chat model to compress (prompts/compress.tmpl).
type LLMCompressor struct {
	Client *llm.Client
}

func (c LLMCompressor) client() *llm.Client { return c.Client }

// Compress implements Compressor.
func (c LLMCompressor) Compress(ctx context.Context, doc string) (string, error) {
	system, user, err := compressPrompt.Render(struct {
		Doc   string
		Chars int
	}{doc, len(doc)})
	if err != nil {
		return "", err
	}
	var reply struct {
		Memory string `json:"memory"`
	}
	if err := c.Client.CompleteJSON(llm.WithStep(ctx, StepCompress), system, user, compressPrompt.Schema, &reply); err != nil {
		return "", fmt.Errorf("lifecycle: compress: %w", err)
	}
	out := strings.TrimSpace(reply.Memory)
	if out == "" {
		return "", fmt.Errorf("lifecycle: compress: %w: the model returned an empty file", llm.ErrBadReply)
	}
	return out + "\n", nil
}
