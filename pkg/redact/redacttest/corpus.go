package redacttest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Corpus is testdata/secrets/corpus.json expanded: secrets to redact and near
// misses to keep.
type Corpus struct {
	Secrets    []CorpusSecret
	NearMisses []NearMiss
}

// CorpusSecret is one form of a secret: Text holds the generated Values (its
// parts of MinValueLen characters or more), none of which may be stored.
type CorpusSecret struct {
	Family string
	Text   string
	Values []string
}

// NearMiss is a text that looks like a secret and is not: Keep must survive.
type NearMiss struct {
	Family string `json:"family"`
	Text   string `json:"text"`
	Keep   string `json:"keep"`
}

// placeholder is "{{spec}}" in a secret's template: "+" joins the literal
// parts around it (so that the file holds no whole token shape, which scanners
// such as GitHub's push protection would flag), and a class letter with a
// length draws a fresh value (see classes).
var placeholder = regexp.MustCompile(`\{\{([^}]*)\}\}`)

// classes are the alphabets of the generated values.
var classes = map[byte]string{
	'U': "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
	'V': "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", // base32, as AWS key ids
	'A': alnum,
	'L': "abcdefghijklmnopqrstuvwxyz0123456789",
	'D': "0123456789",
	'h': "0123456789abcdef",
	'B': alnum + "+/",
	'b': alnum + "_-",
}

// MinValueLen is the shortest generated part that Values lists: a shorter one
// (the 4 hex digits of a UUID-shaped key) turns up by chance in memory ids and
// vectors, so finding it says nothing; each secret has a longer part besides.
const MinValueLen = 8

// LoadCorpus reads and expands the corpus at path. The values are drawn from a
// generator seeded by each case's position, so every run sees the same corpus.
func LoadCorpus(path string) (Corpus, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Corpus{}, err
	}
	var file struct {
		Secrets []struct {
			Family string `json:"family"`
			Text   string `json:"text"`
		} `json:"secrets"`
		NearMisses []NearMiss `json:"near_misses"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		return Corpus{}, fmt.Errorf("%s: %w", path, err)
	}
	c := Corpus{NearMisses: file.NearMisses}
	for i, s := range file.Secrets {
		rng := rand.New(rand.NewPCG(uint64(i), 29))
		cs := CorpusSecret{Family: s.Family}
		var bad error
		cs.Text = placeholder.ReplaceAllStringFunc(s.Text, func(m string) string {
			spec := m[2 : len(m)-2]
			if spec == "+" {
				return ""
			}
			n, err := strconv.Atoi(spec[1:])
			alphabet, ok := classes[spec[0]]
			if err != nil || !ok || n < 1 {
				bad = fmt.Errorf("%s: secret %d: placeholder %q is not {{+}} or a class letter and a length", path, i, m)
				return m
			}
			var b strings.Builder
			for range n {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
			if n >= MinValueLen {
				cs.Values = append(cs.Values, b.String())
			}
			return b.String()
		})
		if bad != nil {
			return Corpus{}, bad
		}
		if len(cs.Values) == 0 {
			return Corpus{}, fmt.Errorf("%s: secret %d (%q) generates no value of %d characters or more", path, i, s.Text, MinValueLen)
		}
		c.Secrets = append(c.Secrets, cs)
	}
	return c, nil
}

// Leaks returns the first of values found in text, "" when none is. A value
// split by the {{+}} of its template (a vendor prefix) is whole in Text; the
// generated part is what must not survive.
func Leaks(text string, values []string) string {
	for _, v := range values {
		if strings.Contains(text, v) {
			return v
		}
	}
	return ""
}
