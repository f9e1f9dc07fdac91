package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/docstore/docstoretest"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/policy"
)

var ns = docstore.Namespace{Tenant: "acme", User: "u1"}

func fsStore(t *testing.T, clk *docstoretest.Clock) *docstore.Store {
	t.Helper()
	b, err := docstore.NewFilesystem(docstore.FilesystemConfig{BaseDir: t.TempDir()}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := docstore.New(docstore.Config{Now: clk.Now}, b, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func jsStore(t *testing.T, clk *docstoretest.Clock) *docstore.Store {
	t.Helper()
	js := bustest.JetStream(t, bustest.StartServer(t))
	b, err := docstore.NewJetStream(context.Background(), docstore.JetStreamConfig{Bucket: "docs"}, js, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := docstore.New(docstore.Config{Now: clk.Now}, b, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func modelClient(t *testing.T, m *llmtest.Model) *llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURL: m.URL(), Model: "fake", MaxRetries: -1, Timeout: 5 * time.Second}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func compactor(t *testing.T, docs *docstore.Store, clk *docstoretest.Clock, threshold int, model lifecycle.Compressor) *lifecycle.Compactor {
	t.Helper()
	p := policy.Defaults()
	p.LongTermCompressCharThreshold = threshold
	c, err := lifecycle.NewCompactor(lifecycle.CompactorConfig{Policy: p, Now: clk.Now}, docs, model, nil, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func entry(clk *docstoretest.Clock, content string) markdown.Entry {
	return markdown.Entry{Time: clk.Now(), Category: markdown.CategoryGeneral, Content: content}
}

// duplicated writes MEMORY.md with restated facts that the rules can merge.
func duplicated(t *testing.T, docs *docstore.Store, clk *docstoretest.Clock) {
	t.Helper()
	for i, c := range []string{
		"Sales files have columns date, product, qty.",
		"The report for Alice is due on 2025-03-01.",
		"Sales files have columns date, product, qty.",
		"sales files have  columns date, product, qty",
		"Uses budget_2025.xlsx with 5000 rows.",
	} {
		clk.Advance(time.Minute)
		if _, err := docs.AppendEntries(context.Background(), ns, []markdown.Entry{entry(clk, c+strings.Repeat(" ", i))}); err != nil {
			t.Fatal(err)
		}
	}
}

func read(t *testing.T, docs *docstore.Store) string {
	t.Helper()
	data, err := docs.ReadFile(context.Background(), ns, docstore.MemoryFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// SPEC B4: over the threshold, at most once per 24 h (fake clock): backup,
// compression, replacement, stamp.
func TestCompressionOncePerDayWithBackup(t *testing.T) {
	ctx := context.Background()
	clk := docstoretest.NewClock()
	docs := fsStore(t, clk)
	duplicated(t, docs, clk)
	c := compactor(t, docs, clk, 100, nil)
	before := read(t, docs)

	rep, err := c.Maybe(ctx, ns)
	if err != nil || !rep.Compressed || rep.ProcessedBy != lifecycle.ByRules {
		t.Fatalf("Maybe = %+v, %v; want compressed by rules", rep, err)
	}
	after := read(t, docs)
	if strings.Count(strings.ToLower(after), "sales files have columns") != 1 || !strings.Contains(after, "2025-03-01") || len(after) >= len(before) {
		t.Fatalf("compressed MEMORY.md:\n%s", after)
	}
	backups, err := docs.Backups(ctx, ns)
	if err != nil || len(backups) != 1 {
		t.Fatalf("Backups = %v, %v", backups, err)
	}
	if data, _ := docs.ReadFile(ctx, ns, backups[0]); string(data) != before {
		t.Fatalf("backup holds %q, want the content before", data)
	}
	if stamp, ok, err := docs.LastLongTermCompress(ctx, ns); err != nil || !ok || !stamp.Equal(clk.Now()) {
		t.Fatalf("stamp = %v, %v, %v", stamp, ok, err)
	}

	duplicated(t, docs, clk)
	clk.Advance(23 * time.Hour)
	if rep, err := c.Maybe(ctx, ns); err != nil || rep.Compressed || !strings.Contains(rep.Skipped, "less than 24h") {
		t.Fatalf("Maybe within 24h = %+v, %v; want skipped", rep, err)
	}
	clk.Advance(2 * time.Hour)
	if rep, err := c.Maybe(ctx, ns); err != nil || !rep.Compressed {
		t.Fatalf("Maybe after 25h = %+v, %v; want compressed", rep, err)
	}
	off := compactor(t, docs, clk, 0, nil)
	clk.Advance(48 * time.Hour)
	if rep, err := off.Maybe(ctx, ns); err != nil || rep.Compressed || !strings.Contains(rep.Skipped, "off") {
		t.Fatalf("threshold 0: %+v, %v; want off", rep, err)
	}
}

// An LLM reply that drops a date is rejected and the original stays; on demand
// the same holds, with the reason in the reply.
func TestModelReplyDroppingADateIsRejected(t *testing.T) {
	ctx := context.Background()
	clk := docstoretest.NewClock()
	docs := fsStore(t, clk)
	duplicated(t, docs, clk)
	m := llmtest.NewModel(t)
	m.SetAnswer(llmtest.StepCompress, func(string) string {
		out, _ := json.Marshal(map[string]string{"memory": "### [2026-11-23 10:16] general\n\nSales files have columns date, product, qty. The report for Alice is due soon.\n\n---\n"})
		return string(out)
	})
	c := compactor(t, docs, clk, 100, lifecycle.LLMCompressor{Client: modelClient(t, m)})
	before := read(t, docs)
	for _, run := range []func() (string, bool, error){
		func() (string, bool, error) { r, err := c.Maybe(ctx, ns); return r.Rejected, r.Compressed, err },
		func() (string, bool, error) {
			r, err := c.CompressNow(ctx, ns, false)
			return r.Rejected, r.Compressed, err
		},
	} {
		rejected, compressed, err := run()
		if err != nil || compressed || !strings.Contains(rejected, "2025-03-01") {
			t.Fatalf("rejected %q, compressed %v, %v; want the lost date named", rejected, compressed, err)
		}
		if read(t, docs) != before {
			t.Fatal("MEMORY.md changed after a rejected compression")
		}
	}
	if m.Calls(llmtest.StepCompress) != 2 {
		t.Fatalf("compress calls = %d", m.Calls(llmtest.StepCompress))
	}
	// The automatic run's rejection is stamped too: otherwise every consolidation
	// past the threshold would ask the model again (SPEC B4: at most once per 24 h).
	if stamp, ok, err := docs.LastLongTermCompress(ctx, ns); err != nil || !ok || !stamp.Equal(clk.Now()) {
		t.Fatalf("stamp after a rejected automatic compression = %v, %v, %v; want %v", stamp, ok, err, clk.Now())
	}
	clk.Advance(time.Hour)
	if r, err := c.Maybe(ctx, ns); err != nil || !strings.Contains(r.Skipped, "less than 24h") || m.Calls(llmtest.StepCompress) != 2 {
		t.Fatalf("Maybe 1h after a rejection = %+v, %v (compress calls %d); want skipped without asking the model", r, err, m.Calls(llmtest.StepCompress))
	}
}

// An append that lands while the model compresses is kept (compare-and-set on
// the JetStream DocStore, the appended text carried over).
func TestAppendRacingACompressionIsKept(t *testing.T) {
	ctx := context.Background()
	clk := docstoretest.NewClock()
	docs := jsStore(t, clk)
	duplicated(t, docs, clk)
	m := llmtest.NewModel(t)
	raced := false
	m.SetAnswer(llmtest.StepCompress, func(user string) string {
		if !raced {
			raced = true
			clk.Advance(time.Minute)
			if _, err := docs.AppendEntries(ctx, ns, []markdown.Entry{entry(clk, "Racing fact: Bob moved to Lisbon on 2025-04-02.")}); err != nil {
				t.Error(err)
			}
			if err := docs.AppendLongTerm(ctx, ns, "Racing long-term note 42."); err != nil {
				t.Error(err)
			}
		}
		doc := user[strings.Index(user, "\n")+1:] // after "MEMORY.md (N characters):"
		out, _ := json.Marshal(map[string]string{"memory": lifecycle.CompressRules(doc)})
		return string(out)
	})
	c := compactor(t, docs, clk, 100, lifecycle.LLMCompressor{Client: modelClient(t, m)})
	rep, err := c.CompressNow(ctx, ns, false)
	if err != nil || !rep.Compressed || rep.ProcessedBy != lifecycle.ByLLM {
		t.Fatalf("CompressNow = %+v, %v", rep, err)
	}
	after := read(t, docs)
	for _, want := range []string{"Racing fact: Bob moved to Lisbon on 2025-04-02.", "Racing long-term note 42.", "2025-03-01"} {
		if !strings.Contains(after, want) {
			t.Fatalf("%q lost by the compression:\n%s", want, after)
		}
	}
	if strings.Count(strings.ToLower(after), "sales files have columns") != 1 {
		t.Fatalf("not compressed:\n%s", after)
	}
	if m.Calls(llmtest.StepCompress) != 1 {
		t.Fatalf("compress calls = %d; the race should not need a second compression", m.Calls(llmtest.StepCompress))
	}
}

// A dry run writes nothing and shows the diff; a model that is down leaves the
// rules to compress.
func TestDryRunAndModelDown(t *testing.T) {
	ctx := context.Background()
	clk := docstoretest.NewClock()
	docs := fsStore(t, clk)
	duplicated(t, docs, clk)
	m := llmtest.NewModel(t)
	m.SetDown(true)
	c := compactor(t, docs, clk, 0, lifecycle.LLMCompressor{Client: modelClient(t, m)})
	before := read(t, docs)
	rep, err := c.CompressNow(ctx, ns, true)
	if err != nil || rep.Compressed || !strings.Contains(rep.Diff, "- Sales files have columns") || rep.ProcessedBy != lifecycle.ByRulesFallback {
		t.Fatalf("dry run = %+v, %v", rep, err)
	}
	if read(t, docs) != before {
		t.Fatal("a dry run wrote MEMORY.md")
	}
	if b, _ := docs.Backups(ctx, ns); len(b) != 0 {
		t.Fatalf("a dry run made backups %v", b)
	}
}

// A dry run of a file the compressor would leave as it is says so and carries no
// diff (which would be the whole file, every line unchanged).
func TestDryRunWithNothingToCompress(t *testing.T) {
	ctx := context.Background()
	clk := docstoretest.NewClock()
	docs := fsStore(t, clk)
	if _, err := docs.AppendEntries(ctx, ns, []markdown.Entry{entry(clk, "Quarterly reports go to finance.")}); err != nil {
		t.Fatal(err)
	}
	rep, err := compactor(t, docs, clk, 0, nil).CompressNow(ctx, ns, true)
	if err != nil || rep.Skipped != "nothing to compress" || rep.Diff != "" || rep.Compressed {
		t.Fatalf("dry run of an incompressible file = %+v, %v; want skipped, no diff", rep, err)
	}
}

// Property (SPEC B4): the offline compressor never loses a date, number, name,
// file name or identifier of a kept entry, and never makes the file longer.
func TestPropertyRuleCompressorLosesNoKeyTokenAndNeverGrows(t *testing.T) {
	words := []string{"Alice", "Bob", "report.csv", "budget_2025.xlsx", "2025-03-01", "42", "3.5", "sales", "columns", "qty", "userId", "v2", "meeting", "Lisbon", "due", "the", "is", "0xfc", "读取：UnicodeDecodeError", "GBK编码", "cp1252"}
	rapid.Check(t, func(rt *rapid.T) {
		doc := rapid.SampledFrom([]string{"", "# Memory\n\n", "notes  \n\n\n"}).Draw(rt, "preamble")
		start := time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)
		var pool []string
		for i := range rapid.IntRange(0, 12).Draw(rt, "entries") {
			var content string
			if len(pool) > 0 && rapid.Bool().Draw(rt, "restate") {
				content = rapid.SampledFrom(pool).Draw(rt, "old")
				if rapid.Bool().Draw(rt, "vary") {
					content += " " + rapid.SampledFrom(words).Draw(rt, "extra")
				}
			} else {
				n := rapid.IntRange(1, 8).Draw(rt, "words")
				parts := make([]string, n)
				for j := range parts {
					parts[j] = rapid.SampledFrom(words).Draw(rt, "word")
				}
				content = strings.Join(parts, rapid.SampledFrom([]string{" ", "  ", " \t"}).Draw(rt, "sep"))
			}
			pool = append(pool, content)
			cat := rapid.SampledFrom([]markdown.Category{markdown.CategoryGeneral, markdown.CategoryErrorSolution}).Draw(rt, "cat")
			if rapid.IntRange(0, 5).Draw(rt, "kind") == 0 {
				// Few days: sections of one day restate each other too.
				doc = markdown.AppendBlock(doc, legacySection(start.AddDate(0, 0, rapid.IntRange(0, 2).Draw(rt, "day")), content))
			} else {
				doc = markdown.AppendBlock(doc, markdown.FormatEntry(markdown.Entry{Time: start.Add(time.Duration(i) * time.Hour), Category: cat, Content: content}))
			}
		}
		out := lifecycle.CompressRules(doc)
		if len(out) > len(doc) {
			rt.Fatalf("grew from %d to %d", len(doc), len(out))
		}
		if err := (lifecycle.GuardConfig{}).Check(doc, out); err != nil {
			rt.Fatalf("%v\n--- before ---\n%s--- after ---\n%s", err, doc, out)
		}
		if _, perrs := markdown.ParseEntries(out); len(perrs) != 0 {
			rt.Fatalf("compressed file has malformed entries %v:\n%s", perrs, out)
		}
		if again := lifecycle.CompressRules(out); again != out {
			rt.Fatalf("not idempotent:\n%s\n---\n%s", out, again)
		}
	})
}

// legacySection is a long-term section as memory_append wrote it before it
// wrote entries (SPEC A9): files holding them are still compressed.
func legacySection(day time.Time, content string) string {
	heading := "## " + day.UTC().Format(time.DateOnly) + "\n"
	if c := markdown.SanitizeContent(content); c != "" {
		return heading + "\n" + c + "\n"
	}
	return heading
}

// Repeats merge into the newest: an entry whose tokens only KeyTokens sees
// ("0" of "0xd6", a name next to CJK text), and a section restated the same
// day; a section of another day stays (its date would be lost).
func TestRuleCompressorMergesRestatements(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	cjk := "Error: 读取导出文件时报错：UnicodeDecodeError: 'utf-8' codec can't decode byte 0xd6. Fix: 用 encoding='gbk' 读取。"
	doc := ""
	for _, b := range []string{
		markdown.FormatEntry(markdown.Entry{Time: t0, Category: markdown.CategoryErrorSolution, Content: cjk}),
		legacySection(t0, "The weekly sync with finance is every Tuesday at 10:00."),
		legacySection(t0.AddDate(0, 0, -1), "The weekly sync with finance is every Tuesday at 10:00."),
		markdown.FormatEntry(markdown.Entry{Time: t0.AddDate(0, 0, 7), Category: markdown.CategoryErrorSolution, Content: cjk}),
		legacySection(t0, "The weekly sync with finance is every Tuesday at 10:00 in room B12."),
	} {
		doc = markdown.AppendBlock(doc, b)
	}
	out := lifecycle.CompressRules(doc)
	if err := (lifecycle.GuardConfig{}).Check(doc, out); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "0xd6") != 1 || !strings.Contains(out, "2026-03-09") || strings.Contains(out, "[2026-03-02 09:00]") {
		t.Fatalf("the repeated entry is not merged into the newest:\n%s", out)
	}
	if strings.Count(out, "Tuesday at 10:00.") != 1 || !strings.Contains(out, "## 2026-03-01") || !strings.Contains(out, "room B12") {
		t.Fatalf("sections: want the one of 2026-03-02 merged into its restatement, the one of 2026-03-01 kept:\n%s", out)
	}
}

func TestGuardAllowsAConfiguredShare(t *testing.T) {
	before := "Alice met Bob on 2025-03-01 about report.csv and budget_2025.xlsx.\n"
	after := "Alice met Bob on 2025-03-01 about report.csv.\n"
	if err := (lifecycle.GuardConfig{}).Check(before, after); err == nil {
		t.Fatal("a lost file name passed the guard at 0%")
	}
	if err := (lifecycle.GuardConfig{MaxLossPercent: 25}).Check(before, after); err != nil {
		t.Fatalf("1 of 5 tokens at 25%%: %v", err)
	}
}

// A "compression" that keeps every token but is longer than the original is
// rejected, however little it grew: the guard's length bound is the original.
func TestGuardRejectsALongerFile(t *testing.T) {
	before := "Alice met Bob on 2025-03-01 about report.csv.\n"
	for _, after := range []string{before + "!", before + "Alice met Bob on 2025-03-01 again.\n"} {
		err := (lifecycle.GuardConfig{MaxLossPercent: 100}).Check(before, after)
		if !errors.Is(err, lifecycle.ErrRejected) || !strings.Contains(err.Error(), "longer") {
			t.Fatalf("Check(%d chars -> %d chars) = %v; want rejected as longer", len(before), len(after), err)
		}
	}
	if err := (lifecycle.GuardConfig{}).Check(before, before); err != nil {
		t.Fatalf("an unchanged file: %v", err)
	}
}

// The automatic trigger's bounds are exact (SPEC B4): a file of exactly
// long_term_compress_char_threshold chars is not over it, one char more is;
// a compression exactly MinInterval after the last one is due again.
func TestAutomaticCompressionBounds(t *testing.T) {
	ctx := context.Background()
	clk := docstoretest.NewClock()
	docs := fsStore(t, clk)
	duplicated(t, docs, clk)
	size := len(read(t, docs))

	rep, err := compactor(t, docs, clk, size, nil).Maybe(ctx, ns)
	if err != nil || rep.Compressed || !strings.Contains(rep.Skipped, "not over long_term_compress_char_threshold") {
		t.Fatalf("Maybe at exactly the threshold (%d chars) = %+v, %v; want skipped as not over it", size, rep, err)
	}
	c := compactor(t, docs, clk, size-1, nil)
	if rep, err := c.Maybe(ctx, ns); err != nil || !rep.Compressed {
		t.Fatalf("Maybe one char over the threshold = %+v, %v; want compressed", rep, err)
	}

	stamp, ok, err := docs.LastLongTermCompress(ctx, ns)
	if err != nil || !ok {
		t.Fatalf("no stamp after a compression: %v", err)
	}
	duplicated(t, docs, clk)
	clk.Set(stamp.Add(lifecycle.DefaultMinInterval - time.Second))
	if rep, err := c.Maybe(ctx, ns); err != nil || rep.Compressed || !strings.Contains(rep.Skipped, "less than 24h") {
		t.Fatalf("Maybe a second before 24h after = %+v, %v; want skipped", rep, err)
	}
	clk.Set(stamp.Add(lifecycle.DefaultMinInterval))
	if rep, err := c.Maybe(ctx, ns); err != nil || !rep.Compressed {
		t.Fatalf("Maybe exactly 24h after the last compression = %+v, %v; want compressed", rep, err)
	}
}

// Two entries restate one fact from a word overlap of exactly nearDuplicate
// (3 shared words of 5: 0.6) on; an entry sharing no word with a newer one stays,
// even when it has no key token the newer one could lack. The file starts with
// its first entry, not with blank lines.
func TestRuleCompressorNearDuplicateBound(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	doc := ""
	for i, content := range []string{
		"alpha beta gamma delta",
		"unrelated words here entirely",
		"alpha beta gamma epsilon",
	} {
		doc = markdown.AppendBlock(doc, markdown.FormatEntry(markdown.Entry{Time: t0.Add(time.Duration(i) * time.Hour), Category: markdown.CategoryGeneral, Content: content}))
	}
	out := lifecycle.CompressRules(doc)
	if strings.Contains(out, "delta") || !strings.Contains(out, "alpha beta gamma epsilon") {
		t.Fatalf("the older of two entries overlapping by 0.6 is not merged into the newer:\n%s", out)
	}
	if !strings.Contains(out, "unrelated words here entirely") {
		t.Fatalf("an entry sharing no word with the newer ones was dropped:\n%s", out)
	}
	if !strings.HasPrefix(out, "### [") {
		t.Fatalf("the compressed file does not start with its first entry: %q", out)
	}
}

// A compression exactly as long as the file is kept: only a longer one is
// refused. Here tightening a double space takes a byte and the blank line
// between two entries written without one adds a byte back.
func TestRuleCompressorKeepsACompressionOfEqualLength(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	first := markdown.FormatEntry(markdown.Entry{Time: t0, Category: markdown.CategoryGeneral, Content: "use  the staging bucket"})
	second := markdown.FormatEntry(markdown.Entry{Time: t0.Add(time.Hour), Category: markdown.CategoryGeneral, Content: "rotate keys monthly"})
	doc := first + second
	out := lifecycle.CompressRules(doc)
	if len(out) != len(doc) {
		t.Fatalf("the example no longer compresses to its own length (%d bytes to %d):\n%s", len(doc), len(out), out)
	}
	if strings.Contains(out, "use  the") || !strings.Contains(out, "use the staging bucket") || !strings.Contains(out, "---\n\n### [") {
		t.Fatalf("a compression as long as the file was refused: got the file back\n%s", out)
	}
}
