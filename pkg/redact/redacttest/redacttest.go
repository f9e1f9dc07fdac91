// Package redacttest generates credentials inside ordinary sentences, for the
// property tests of every place that must keep them out of memory (pkg/redact's
// rules, ingest, the session state, the write RPCs).
package redacttest

import (
	"strings"

	"pgregory.net/rapid"
)

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func body(t *rapid.T, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[rapid.IntRange(0, len(alnum)-1).Draw(t, "c")]
	}
	return string(b)
}

// Credential draws a provider credential of a shape gitleaks' rules know: an
// OpenAI, GitHub, AWS, GitLab, Slack or Stripe key.
func Credential() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		return rapid.SampledFrom([]func() string{
			func() string { return "sk-proj-" + body(t, rapid.IntRange(24, 60).Draw(t, "n")) },
			func() string { return "ghp_" + body(t, 36) },
			func() string { return "AKIA" + strings.ToUpper(body(t, 16)) },
			func() string { return "glpat-" + body(t, 20) },
			func() string { return "xoxb-" + body(t, 24) },
			func() string { return "sk_live_" + body(t, 24) },
		}).Draw(t, "kind")()
	})
}

// Secret is a generated text and the values in it that must not be remembered.
type Secret struct {
	Text string
	// Values are the credential and the password of Text.
	Values []string
	// Before and After are ordinary words of Text around the values, which
	// redaction keeps.
	Before, After string
}

// Sentence draws an ordinary sentence holding a credential and a password.
func Sentence() *rapid.Generator[Secret] {
	return rapid.Custom(func(t *rapid.T) Secret {
		cred := Credential().Draw(t, "credential")
		pw := body(t, rapid.IntRange(8, 20).Draw(t, "pwlen"))
		before := rapid.SampledFrom([]string{"Please use", "My key for the export job is", "Heads up, the token", "Remember that the key"}).Draw(t, "before")
		const after = "for the staging report."
		return Secret{Text: before + " " + cred + " and the password: " + pw + " " + after, Values: []string{cred, pw}, Before: before, After: after}
	})
}

// Leaks reports the first value of s found in text, "" when none is.
func (s Secret) Leaks(text string) string { return Leaks(text, s.Values) }
