package memory_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bm25"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// topics is the meaning the test embedder knows: a word of a topic points its
// text towards the topic's axis, whatever words it shares with another text.
var topics = [][]string{
	{"hobbies", "paint", "painting", "hike", "hiking", "guitar"},
	{"money", "invoice", "budget", "salary", "rent"},
}

// topicEmbedding embeds a text as the sum of its words' topic axes (dimensions
// 0 and 1) and a small hashed trace of each word, so that texts of one topic are
// near each other and texts of none are near nothing.
func topicEmbedding(text string, dims int) []float32 {
	v := make([]float32, dims)
	for _, w := range strings.Fields(strings.ToLower(text)) {
		w = strings.Trim(w, ".,;:!?\"'()")
		for axis, words := range topics {
			if slices.Contains(words, w) {
				v[axis] += 4
			}
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(w))
		v[2+int(h.Sum32())%(dims-2)] += 0.3
	}
	return v
}

// semanticFixture is a memory service whose embedder is an OpenAI-compatible
// endpoint answering topicEmbedding, with cfg's ranking (hybrid mode).
func semanticFixture(t *testing.T, cfg memory.Config) *fixture {
	t.Helper()
	m := llmtest.NewModel(t)
	m.SetEmbedding(topicEmbedding)
	emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: m.URL(), Model: "topics", Dimensions: 32, Retries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureWith(t, cfg, emb)
}

func (f *fixture) addAll(t fataler, texts ...string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, text := range texts {
		rep, err := f.svc.Add(context.Background(), "acme", events.AddRequest{UserID: "u1", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		ids[rep.MemoryIDs[0]] = text
	}
	return ids
}

func rankedTexts(rs []memory.Ranked) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%q %.3f", r.Record.Text, r.Score)
	}
	return out
}

// The keyword-led fusion (the default) finds a memory that shares no word with
// the query through the dense side, and ranks it under the memory that shares
// the query's word: "hobbies" finds "I paint on Sundays", after "the hobbies
// club meets on Mondays", and both before a memory the query has nothing to do
// with.
func TestKeywordLedFusionAddsMeaningUnderKeywordMatches(t *testing.T) {
	f := semanticFixture(t, memory.Config{})
	f.addAll(t, "The hobbies club meets on Mondays", "I paint on Sundays", "The rent goes up in March", "My invoice is late")
	ranked, err := f.svc.Recall(context.Background(), "acme", "u1", "what are my hobbies?", []vectorstore.MemoryType{vectorstore.Episodic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranked) < 3 || ranked[0].Record.Text != "The hobbies club meets on Mondays" || ranked[1].Record.Text != "I paint on Sundays" {
		t.Fatalf("ranked %v; want the keyword match first and the painting memory (meaning only) second", rankedTexts(ranked))
	}
	if !(ranked[1].Score > ranked[2].Score) {
		t.Fatalf("ranked %v; want the painting memory strictly above the unrelated ones", rankedTexts(ranked))
	}
}

// A rare word the query shares with one memory keeps that memory first under
// the keyword-led fusion, though many memories are nearer in meaning: "paint
// schedule" ranks "The schedule changed" (the only memory with "schedule") over
// the memories that paint, which the dense side prefers. Reciprocal rank fusion
// (FusionRRF) ranks a painting memory first here: second on both sides beats
// first on one and last on the other.
func TestKeywordLedFusionKeepsARareKeywordFirst(t *testing.T) {
	f := semanticFixture(t, memory.Config{})
	f.addAll(t, "The schedule changed", "paint the fence", "paint the door", "paint the wall", "I paint, hike and play guitar")
	ranked, err := f.svc.Recall(context.Background(), "acme", "u1", "paint schedule", []vectorstore.MemoryType{vectorstore.Episodic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranked) == 0 || ranked[0].Record.Text != "The schedule changed" {
		t.Fatalf("ranked %v; want the memory with the rare word first", rankedTexts(ranked))
	}
}

// Whatever the memories and the query, the keyword-led fusion puts a memory
// sharing a word with the query first whenever one exists: a memory only the
// dense side finds scores at most DenseWeight (0.5) against 1 for the best
// keyword match, and the recency and use bonuses of fresh memories cannot close
// that gap.
func TestPropertyKeywordLedFusionKeepsAKeywordMatchFirst(t *testing.T) {
	words := []string{"hobbies", "paint", "guitar", "hike", "budget", "rent", "invoice", "salary", "garden", "train", "coffee", "report"}
	f := semanticFixture(t, memory.Config{})
	rapid.Check(t, func(rt *rapid.T) {
		if _, err := f.svc.Reset(context.Background(), "acme", events.ResetRequest{UserID: "u1"}); err != nil {
			rt.Fatal(err)
		}
		n := rapid.IntRange(1, 8).Draw(rt, "memories")
		var texts []string
		for i := range n {
			ws := rapid.SliceOfN(rapid.SampledFrom(words), 1, 4).Draw(rt, fmt.Sprintf("words%d", i))
			texts = append(texts, fmt.Sprintf("note %d: %s", i, strings.Join(ws, " ")))
		}
		f.addAll(rt, texts...)
		query := strings.Join(rapid.SliceOfN(rapid.SampledFrom(words), 1, 2).Draw(rt, "query"), " ")
		ranked, err := f.svc.Recall(context.Background(), "acme", "u1", query, []vectorstore.MemoryType{vectorstore.Episodic}, nil)
		if err != nil {
			rt.Fatal(err)
		}
		shares := func(text string) bool {
			q := bm25.Tokenize(query)
			return slices.ContainsFunc(bm25.Tokenize(text), func(t string) bool { return slices.Contains(q, t) })
		}
		if slices.ContainsFunc(texts, shares) && (len(ranked) == 0 || !shares(ranked[0].Record.Text)) {
			rt.Fatalf("query %q ranked %v first; a memory shares a word with it", query, rankedTexts(ranked))
		}
	})
}
