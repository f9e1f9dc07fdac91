package redact

import (
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/redact/redacttest"
)

// corpusPath is the secret corpus (testdata/secrets/corpus.json).
const corpusPath = "../../testdata/secrets/corpus.json"

// Every form of the corpus's secrets is redacted, and at least 95% of its near
// misses are kept; the end-to-end figure through the pipeline is in
// pkg/app (TestSecretCorpusNeverStored).
func TestSecretCorpus(t *testing.T) {
	c := loadCorpus(t)
	families := map[string]bool{}
	for _, s := range c.Secrets {
		families[s.Family] = true
		got, _ := Text(s.Text)
		if v := redacttest.Leaks(got, s.Values); v != "" {
			t.Errorf("%s: %q left %q in %q", s.Family, s.Text, v, got)
		}
	}
	if len(c.Secrets) < 150 || len(families) < 15 || len(c.NearMisses) < 100 {
		t.Fatalf("corpus has %d secrets of %d families and %d near misses; want >= 150, 15, 100", len(c.Secrets), len(families), len(c.NearMisses))
	}
	kept := 0
	for _, n := range c.NearMisses {
		if got, _ := Text(n.Text); strings.Contains(got, n.Keep) {
			kept++
		} else {
			t.Logf("near miss lost (%s): %q -> %q", n.Family, n.Text, got)
		}
	}
	if kept*100 < 95*len(c.NearMisses) {
		t.Errorf("kept %d of %d near misses, want >= 95%%", kept, len(c.NearMisses))
	}
}

// loadCorpus is the corpus, or the test's end.
func loadCorpus(t testing.TB) redacttest.Corpus {
	t.Helper()
	c, err := redacttest.LoadCorpus(corpusPath)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Redacting redacted text changes nothing: a second pass (the extractor's over
// what ingest kept, an export imported again) neither finds a secret in a
// marker nor eats the text around one.
func TestPropertyRedactIsIdempotent(t *testing.T) {
	c := loadCorpus(t)
	var pieces []string
	for _, s := range c.Secrets {
		pieces = append(pieces, s.Text)
	}
	for _, n := range c.NearMisses {
		pieces = append(pieces, n.Text)
	}
	pieces = append(pieces, Marker("password"), Marker("api_key"), "@db.internal:5432/app", "password", "token: ", "=", "\n", " is ", "://")
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOfN(rapid.OneOf(rapid.SampledFrom(pieces), rapid.String()), 1, 6).Draw(t, "parts")
		sep := rapid.SampledFrom([]string{"", " ", "\n", ", "}).Draw(t, "sep")
		once, _ := Text(strings.Join(parts, sep))
		if twice, found := Text(once); twice != once || found {
			t.Fatalf("second pass changed\n%q\nto\n%q (found %v)", once, twice, found)
		}
	})
}

// Only the secret's value changes: the sentences around it come back byte for
// byte.
func TestPropertyTextOutsideSecretUnchanged(t *testing.T) {
	c := loadCorpus(t)
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.SampledFrom(c.Secrets).Draw(t, "secret")
		before := rapid.SampledFrom(c.NearMisses).Draw(t, "before").Text
		after := rapid.SampledFrom(c.NearMisses).Draw(t, "after").Text
		got, _ := Text(before + "\n" + s.Text + "\n" + after)
		if !strings.HasPrefix(got, before+"\n") || !strings.HasSuffix(got, "\n"+after) || redacttest.Leaks(got, s.Values) != "" {
			t.Fatalf("Text(%q) = %q", before+"\n"+s.Text+"\n"+after, got)
		}
	})
}

// The case: a second pass over a redacted connection string keeps its
// host and database.
func TestRedactedURLSurvivesASecondPass(t *testing.T) {
	in := "postgres://admin:" + "Tr0ub4dor&3xyz" + "@db.internal:5432/reports"
	once, _ := Text(in)
	twice, _ := Text(once)
	if want := "postgres://admin:[REDACTED:password]@db.internal:5432/reports"; once != want || twice != want {
		t.Fatalf("Text = %q, then %q; want %q both times", once, twice, want)
	}
}

// Any text: Text never panics, and a second pass changes nothing.
func FuzzText(f *testing.F) {
	for _, s := range []string{"postgres://admin:pw1234@db/app", "DB_PASSWORD=hunter22", `{"password": "a b c"}`, "my API key is x" + "yz-1234567890abcdef", Marker("password") + "@host"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once, _ := Text(s)
		if twice, _ := Text(once); twice != once {
			t.Fatalf("second pass changed %q to %q", once, twice)
		}
	})
}
