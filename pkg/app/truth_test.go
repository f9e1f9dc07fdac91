package app_test

import (
	"context"
	"flag"
	"fmt"
	"html"
	"io"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/consolidate"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Issue 28: the memory stays true while it is used.

// fewChecks runs the rapid properties of a test n times unless -rapid.checks
// says otherwise: each check drives the whole stack.
func fewChecks(t *testing.T, n int) {
	t.Helper()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if set {
		return
	}
	old := flag.Lookup("rapid.checks").Value.String()
	if err := flag.Set("rapid.checks", fmt.Sprint(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("rapid.checks", old) })
}

// unrelated are statements no two of which share a content word.
var unrelated = []string{
	"Remember: my charts use teal as the main colour.",
	"Remember: the label on the archive box says Orion.",
	"Remember: the quarterly report is due on 14 March.",
	"Remember: my manager is called Beatrix Holm.",
	"Remember: the printer in room 204 jams on glossy paper.",
	"Remember: the office wifi network is called Heron.",
}

// plain are unrelated personal statements: they become episodic memories and
// facts, not entries of MEMORY.md (which the pack shows first, and then leaves
// out the episodes that repeat it).
var plain = []string{"I moved to Lisbon in 2019.", "My cat is named Pixel.", "I play the cello on weekends."}

// rememberAll says statements as the user in one session and ends it.
func (r rig) rememberAll(t *testing.T, user, session string, statements []string) {
	t.Helper()
	for _, s := range statements {
		r.say(t, user, session, events.RoleUser, s)
	}
	if _, err := r.client.EndSession(context.Background(), user, session); err != nil {
		t.Fatal(err)
	}
	r.waitIdle(t)
}

// memories reads every record of user straight from the vector store, by id.
func (r rig) memories(t testing.TB, user string) map[string]vectorstore.Record {
	t.Helper()
	out := map[string]vectorstore.Record{}
	offset := ""
	for {
		recs, next, err := r.stack.Runtime().Vectors.Scroll(context.Background(), vectorstore.Filter{Tenant: "acme", UserID: user}, offset, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			out[rec.ID] = rec
		}
		if next == "" {
			return out
		}
		offset = next
	}
}

// usedMetadata are the metadata keys a use may change: the hit bookkeeping and
// what SPEC C5's reconsolidation records.
var usedMetadata = []string{records.MetaContext, records.MetaUpdates, records.MetaHitEvents,
	records.MetaReconsolidatedAt, records.MetaReconsolidatedSessions}

// Item 1: under the offline processors, any sequence of context and search
// requests leaves the text (and vector, time, chat, speaker, every other
// metadata field) of every memory as it was; a use changes only the hit count,
// context, updates and the history, and a used episode still gets an updates
// entry for its new context (SPEC C5).
func TestReadsNeverRewriteTheMemory(t *testing.T) {
	fewChecks(t, 15)
	r := upStack(t)
	ctx := context.Background()
	const user = "reader"
	r.rememberAll(t, user, "s0", unrelated[:4])
	r.say(t, user, "s0b", events.RoleUser, "My sales files have the columns region, month and revenue.")
	r.rememberAll(t, user, "s0b", nil)
	original := r.memories(t, user)
	if len(original) < 4 {
		t.Fatalf("want the statements stored, got %d memories", len(original))
	}
	queries := []string{"which columns do my sales files have?", "what colour are my charts?",
		"who is my manager?", "when is the report due?", "anything about the archive label?", "tell me about the weather"}
	rapid.Check(t, func(rt *rapid.T) {
		before := r.memories(t, user)
		used := map[string]int{}
		for range rapid.IntRange(1, 6).Draw(rt, "requests") {
			q := rapid.SampledFrom(queries).Draw(rt, "query")
			if rapid.Bool().Draw(rt, "search") {
				if _, err := r.client.Search(ctx, events.SearchRequest{UserID: user, Query: q}); err != nil {
					rt.Fatal(err)
				}
				continue
			}
			session := rapid.SampledFrom([]string{"", "s1", "s2", "s3"}).Draw(rt, "session")
			pack, err := r.client.Context(ctx, events.ContextRequest{UserID: user, SessionID: session, Query: q})
			if err != nil {
				rt.Fatal(err)
			}
			for _, it := range slices.Concat(pack.EpisodicItems, pack.SemanticItems) {
				used[it.ID]++
			}
		}
		r.waitIdle(t)
		after := r.memories(t, user)
		if !slices.Equal(slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(original))) {
			rt.Fatalf("memories changed: %v, want %v", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(original)))
		}
		for id, a := range after {
			o, b := original[id], before[id]
			if a.Text != o.Text {
				rt.Fatalf("memory %s: text rewritten by a read:\n got %q\nwant %q", id, a.Text, o.Text)
			}
			if !reflect.DeepEqual(a.Vector, o.Vector) || !a.TS.Equal(o.TS) || a.ChatID != o.ChatID || a.Who != o.Who {
				rt.Fatalf("memory %s: vector, time, chat or speaker changed by a read", id)
			}
			if a.HitCount != b.HitCount+used[id] {
				rt.Fatalf("memory %s: hit count %d after %d uses, was %d", id, a.HitCount, used[id], b.HitCount)
			}
			for k, v := range o.Metadata {
				if !slices.Contains(usedMetadata, k) && !reflect.DeepEqual(a.Metadata[k], v) {
					rt.Fatalf("memory %s: metadata %s changed by a read: %v, was %v", id, k, a.Metadata[k], v)
				}
			}
			for k := range a.Metadata {
				if _, ok := o.Metadata[k]; !ok && !slices.Contains(usedMetadata, k) {
					rt.Fatalf("memory %s: a read added metadata %s = %v", id, k, a.Metadata[k])
				}
			}
			if a.MemoryType == vectorstore.Episodic && a.HitCount > 0 && len(records.AnyList(a.Metadata[records.MetaUpdates])) == 0 {
				rt.Fatalf("memory %s: used %d times and no updates entry (SPEC C5)", id, a.HitCount)
			}
		}
	})
}

// ops lists the history operations of a memory, oldest first.
func (r rig) ops(t *testing.T, user, id string) []string {
	t.Helper()
	h, err := r.client.History(context.Background(), events.HistoryRequest{UserID: user, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, c := range h.Changes {
		ops = append(ops, c.Op)
	}
	return ops
}

// Item 2: looking is not using. A context request with "record_hits": false,
// and the inspector's "Show context" (which sends it), count no hit and write
// no history; the default request, an agent's, still does (SPEC C4).
func TestLookingIsNotUsing(t *testing.T) {
	addr := bustest.FreeAddr(t)
	r := upStackWith(t, "AGENTMEM_HTTP_LISTEN="+addr, "AGENTMEM_HTTP_UI=true")
	ctx := context.Background()
	const user = "looker"
	r.rememberAll(t, user, "s0", unrelated[:4])
	before := r.memories(t, user)
	historyOf := func() map[string][]string {
		out := map[string][]string{}
		for id := range before {
			out[id] = r.ops(t, user, id)
		}
		return out
	}
	history := historyOf()

	const query = "who is my manager?"
	pack, err := r.client.Context(ctx, events.ContextRequest{UserID: user, SessionID: "s1", Query: query, RecordHits: events.NoHits()})
	if err != nil {
		t.Fatal(err)
	}
	used := slices.Concat(pack.EpisodicItems, pack.SemanticItems)
	if len(used) == 0 {
		t.Fatalf("the preview found no memory for %q: nothing to count", query)
	}
	resp, err := http.Get("http://" + addr + "/ui/t/acme/u/" + user + "/search?q=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Beatrix") {
		t.Fatalf("inspector search: %d, the memory asked for is not shown:\n%s", resp.StatusCode, page)
	}
	r.waitIdle(t)
	for id, rec := range r.memories(t, user) {
		if rec.HitCount != 0 || len(records.AnyList(rec.Metadata[records.MetaUpdates])) != 0 {
			t.Errorf("memory %s after previews: hit count %d, updates %v; want none", id, rec.HitCount, rec.Metadata[records.MetaUpdates])
		}
	}
	if got := historyOf(); !reflect.DeepEqual(got, history) {
		t.Errorf("previews wrote history: %v, was %v", got, history)
	}

	// An agent's request (record_hits absent) uses what it gets.
	if _, err := r.client.Context(ctx, events.ContextRequest{UserID: user, SessionID: "s1", Query: query}); err != nil {
		t.Fatal(err)
	}
	r.waitIdle(t)
	after := r.memories(t, user)
	for _, it := range used {
		if after[it.ID].HitCount != 1 || !slices.Contains(r.ops(t, user, it.ID), consolidate.OpHit) {
			t.Errorf("memory %s after an agent's request: hit count %d, history %v; want 1 and a hit", it.ID, after[it.ID].HitCount, r.ops(t, user, it.ID))
		}
	}
}

// markers name each statement of unrelated and plain by a word no other one
// holds.
var markers = []string{"teal", "Orion", "quarterly", "Beatrix", "printer", "Heron", "Lisbon", "Pixel", "cello"}

// factsIn lists the markers text holds.
func factsIn(text string) []string {
	var out []string
	for _, m := range markers {
		if strings.Contains(strings.ToLower(text), strings.ToLower(m)) {
			out = append(out, m)
		}
	}
	return out
}

// inspectorMemories are the texts the inspector's memory list shows.
var inspectorMemories = regexp.MustCompile(`<a class="memory" href="[^"]*">([^<]*)</a>`)

// Item 3: one memory shows one fact. After unrelated "Remember: …" requests and
// personal statements in one session, no search result, context-pack item, line of the pack's prompt
// or memory of the inspector's list shows two of them; the earlier messages an
// episode keeps are shown apart, as its context.
func TestOneMemoryShowsOneFact(t *testing.T) {
	fewChecks(t, 5)
	addr := bustest.FreeAddr(t)
	r := upStackWith(t, "AGENTMEM_HTTP_LISTEN="+addr, "AGENTMEM_HTTP_UI=true")
	ctx := context.Background()
	check := 0
	rapid.Check(t, func(rt *rapid.T) {
		check++
		user := fmt.Sprintf("one%d", check)
		remember := rapid.Permutation(slices.Clone(unrelated)).Draw(rt, "remember")
		said := rapid.Permutation(slices.Concat(remember[:rapid.IntRange(1, len(remember)).Draw(rt, "n")], plain)).Draw(rt, "said")
		r.rememberAll(t, user, "s0", said)
		one := func(where, text string) {
			if fs := factsIn(text); len(fs) > 1 {
				rt.Fatalf("%s shows %d facts %v as one memory: %q", where, len(fs), fs, text)
			}
		}
		withContext, packedWithContext := 0, 0
		for _, s := range said {
			marker := factsIn(s)[0]
			rep, err := r.client.Search(ctx, events.SearchRequest{UserID: user, Query: marker})
			if err != nil {
				rt.Fatal(err)
			}
			found := false
			for _, res := range rep.Results {
				one("search result", res.Text)
				found = found || slices.Contains(factsIn(res.Text), marker)
				if res.MemoryType == events.MemoryEpisodic && len(res.Context) > 0 {
					withContext++
				}
			}
			if !found {
				rt.Fatalf("a search for %q finds no memory of it: %+v", marker, rep.Results)
			}
			pack, err := r.client.Context(ctx, events.ContextRequest{UserID: user, Query: marker, RecordHits: events.NoHits()})
			if err != nil {
				rt.Fatal(err)
			}
			for _, it := range slices.Concat(pack.EpisodicItems, pack.SemanticItems) {
				one("context pack item", it.Text)
				if len(it.Context) > 0 {
					packedWithContext++
				}
			}
			for l := range strings.Lines(pack.Prompt) {
				if strings.HasPrefix(l, "- ") {
					one("prompt line", l)
				}
			}
		}
		// The second statement on keeps the ones before it, as context.
		if withContext == 0 || packedWithContext == 0 {
			rt.Fatalf("no episode shows the messages said before it as its context: %d search results, %d pack items", withContext, packedWithContext)
		}
		resp, err := http.Get("http://" + addr + "/ui/t/acme/u/" + user + "/memories")
		if err != nil {
			rt.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		rows := inspectorMemories.FindAllStringSubmatch(string(page), -1)
		if len(rows) < len(said) {
			rt.Fatalf("the inspector lists %d memories for %d statements:\n%s", len(rows), len(said), page)
		}
		for _, row := range rows {
			one("the inspector's memory list", html.UnescapeString(row[1]))
		}
	})
}
