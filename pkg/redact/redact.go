// Package redact keeps credentials and instructions planted in content out of
// memory. Text replaces every credential it finds by a marker naming its kind,
// "[REDACTED:api_key]", never any part of the value; Injections drops the
// sentences of a text that address an AI assistant with instructions ("ignore
// all previous instructions", "you are now in admin mode"). Ingest applies both
// to an observation and its context before the write decision, the session store
// to each message it keeps in the session state, and the extractor to a
// session's messages before extraction, so no episodic memory, fact, Markdown
// entry, summary or session state is made from the clear text, whichever
// processor (rules or model) writes it. What callers write themselves (the
// append, add, update, item.save and item.update RPCs) goes through Text alone:
// its credentials are masked, its instructions are the caller's own. The raw
// event stream is not rewritten: it is the source of truth and keeps what the
// agent published.
//
// The rules follow gitleaks' default rule set for the common providers (the
// prefixes and lengths of its aws-access-token, github-pat, gitlab-pat,
// slack-*-token, stripe-access-token, openai-api-key, anthropic-api-key,
// gcp-api-key, private-key and jwt rules) plus its generic rule's shape: a
// secret-named key (password, passwd, pwd, secret, token, api_key, apikey,
// access_key, client_secret, passwort, 密码) followed by = : or "is", and
// credentials inside URLs (scheme://user:password@host). gitleaks v8 itself is
// a Go module, but its detect package brings its command line's dependencies
// (viper, zerolog, lipgloss, …) into every binary and scans with about 200
// regular expressions per text; the handful here run on every observation of
// the ingest path. The rules are lexical: a password said in words ("my
// password is the name of my dog") is not found.
package redact

import (
	"regexp"
	"strings"
)

// rule is one kind of credential: group 1 of re is the value, or the whole
// match without a group. keywords (lower case) are what a text must contain for
// re to be tried at all, as gitleaks does: ordinary text contains none, and the
// scan of a message then costs a few substring searches instead of every
// regular expression (they took 39% of ingest's CPU).
type rule struct {
	kind     string
	keywords []string
	re       *regexp.Regexp
}

// containsAny reports whether lower contains one of words.
func containsAny(lower string, words []string) bool {
	for _, w := range words {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

var rules = []rule{
	{"private_key", []string{"-----begin"}, regexp.MustCompile(`-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY-----|$)`)},
	{"api_key", []string{"sk-", "aiza", "sk_", "rk_", "pk_"}, regexp.MustCompile(`\b(?:sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-)?[A-Za-z0-9_\-]{20,}|AIza[0-9A-Za-z_\-]{35}|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,})\b`)},
	{"access_token", []string{"gh", "glpat-", "xox", "akia", "asia", "abia", "acca", "npm_", "hf_"}, regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}|glpat-[A-Za-z0-9_\-]{20,}|xox[abposr]-[A-Za-z0-9\-]{10,}|(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}|npm_[A-Za-z0-9]{36}|hf_[A-Za-z]{34})\b`)},
	{"jwt", []string{"eyj"}, regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}`)},
	{"password", []string{"://"}, regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:([^\s@/]+)@`)},
	{"bearer_token", []string{"bearer"}, regexp.MustCompile(`(?i)\bbearer\s+([A-Za-z0-9_\-.=+/]{16,})`)},
	{"password", []string{"passw", "pwd", "kennwort", "passphrase", "密码", "口令"}, regexp.MustCompile(`(?i)(?:\b(?:password|passwd|pwd|passwort|kennwort|passphrase)|密码|口令)(?:\s+(?:is|ist|for\s+\S+\s+is|für\s+\S+(?:\s+\S+)?\s+ist))?\s*(?:[=:：]|是|为)?\s*["']?([^\s"',;]{4,})`)},
	{"secret", []string{"secret", "token", "api", "key", "schlüssel"}, regexp.MustCompile(`(?i)\b(?:secret|token|api[_\-\s]?key|access[_\-]?key|client[_\-]?secret|auth[_\-]?key|private[_\-]?key|schlüssel)(?:\s+(?:is|ist))?\s*(?:[=:：]|是)\s*["']?([A-Za-z0-9_\-+/=.]{12,})`)},
}

// Text returns text with every credential replaced by "[REDACTED:<kind>]", and
// whether it found one. Text without one is returned as is.
func Text(text string) (string, bool) {
	found := false
	// The keywords are looked for in the original text: a replacement only
	// removes values and adds markers, which the rules skip.
	lower := strings.ToLower(text)
	for _, r := range rules {
		if !containsAny(lower, r.keywords) || !r.re.MatchString(text) {
			continue
		}
		text = r.re.ReplaceAllStringFunc(text, func(m string) string {
			sub := r.re.FindStringSubmatchIndex(m)
			if len(sub) >= 4 && sub[2] >= 0 {
				if strings.HasPrefix(m[sub[2]:sub[3]], "[REDACTED:") {
					return m
				}
				found = true
				return m[:sub[2]] + Marker(r.kind) + m[sub[3]:]
			}
			found = true
			return Marker(r.kind)
		})
	}
	return text, found
}

// Marker is what replaces a credential of kind.
func Marker(kind string) string { return "[REDACTED:" + kind + "]" }

// injectionRe: a sentence that instructs an AI assistant, planted in content.
var injectionRe = regexp.MustCompile(`(?i)\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|earlier|your)\s+(?:instructions|prompts?|rules)\b|\byou\s+are\s+now\b|\b(?:system\s+prompt|developer\s+mode|admin\s+mode|jailbreak)\b|\bassistant\s*,\s*(?:you|always|never|ignore)\b|忽略(?:之前|以上|前面)?的?(?:所有)?(?:指令|指示|提示)|\bignorier(?:e|en)?\s+(?:alle\s+)?(?:vorherigen|bisherigen|obigen)\s+(?:anweisungen|instruktionen)\b`)

// injectionWords are what a text must contain (lower case) for injectionRe to be
// tried.
var injectionWords = []string{"ignore", "disregard", "forget", "now", "prompt", "mode", "jailbreak", "assistant", "忽略", "ignorier"}

// sentenceEnd splits a text into sentences for Injections.
var sentenceEnd = regexp.MustCompile(`[.!?。！？]+(?:\s+|$)|\n+`)

// Injections returns text without the sentences that instruct an AI assistant
// (injectionRe), and whether it dropped one. A text without one is returned as
// is.
func Injections(text string) (string, bool) {
	if !containsAny(strings.ToLower(text), injectionWords) || !injectionRe.MatchString(text) {
		return text, false
	}
	var b strings.Builder
	start := 0
	for _, loc := range append(sentenceEnd.FindAllStringIndex(text, -1), []int{len(text), len(text)}) {
		s := text[start:loc[1]]
		if !injectionRe.MatchString(s) {
			b.WriteString(s)
		}
		start = loc[1]
		if start >= len(text) {
			break
		}
	}
	return strings.TrimSpace(b.String()), true
}

// Clean applies Text, then Injections.
func Clean(text string) string {
	text, _ = Text(text)
	text, _ = Injections(text)
	return text
}
