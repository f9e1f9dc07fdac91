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
// agent published, so pkg/client (and agentmem mcp) apply Text to an
// observation before publishing it unless told to keep secrets.
//
// Before the rules grew, gitleaks' default rule set (github.com/zricethezav/
// gitleaks/v8 v8.30.1, 222 rules; it builds here) was run over the secret
// corpus of testdata/secrets (180 forms of 19 families, 104 near misses):
// its detector found 121 of the 180 and kept every near miss. What it missed
// is what conversations hold: connection strings (9 of 12 missed), low-entropy
// passwords in environment files and JSON (DB_PASS=…, "password": "…"), and
// secrets said in words ("my API key is …": 19 of 20 missed); its rules are
// tuned for source code, where an entropy floor and a code-shaped key keep
// false alarms down. Its detect package also brings 81 modules (viper,
// zerolog, archive readers, a terminal UI library) into every binary, and its
// config package alone viper and its parsers. So the rules here are this
// package's own: the vendor prefixes and lengths of gitleaks' rules for the
// common providers (AWS, GitHub, GitLab, Slack, Stripe, Square, OpenAI,
// Anthropic, Google, Hugging Face, npm, PyPI, SendGrid, Shopify,
// DigitalOcean, Databricks, Linear, Grafana, Telegram, Slack and Discord
// webhooks, private keys, JWTs), plus the forms people write: an assignment to
// a credential-named key (DB_PASSWORD=…, aws_secret_access_key = …,
// "password": "…", X-API-Key: …, AccountKey=…, a Kubernetes env entry), a
// credential in a URL or a curl -u, an Authorization header, and prose ("my
// API key is …", "the password for the NAS is …", "Mein Passwort ist …",
// "我的密码是…"). A value found by the words around it must look like one: a
// password at least four characters and not a word that follows "password
// is" in ordinary text ("required", "expired"), any other key at least eight
// characters with a digit or both cases (customer_id is not). On the corpus
// they redact all 180 and keep all 104 near misses (TestSecretCorpus;
// BENCHMARKS.md has the end-to-end figures). A password said in words ("my
// password is the name of my dog") is still not found.
package redact

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// rule is one kind of credential. The value is re's first participating group
// named "v…" (several alternatives: a quoted value may hold spaces), or the
// whole match without one; a group named "k" is the key a value was assigned
// to. keywords (lower case) are what a text must contain for re to be tried at
// all, as gitleaks does: ordinary text contains none, and the scan of a message
// then costs a few substring searches instead of every regular expression
// (they took 39% of ingest's CPU). valid, when set, vets the value (and key)
// found: a rule that finds values by the words around them needs it to tell
// "password: hunter22" from "password: required".
type rule struct {
	kind     string
	keywords []string
	re       *regexp.Regexp
	valid    func(key, value string) bool
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

// secretWords end a key whose value is a credential (DB_PASSWORD, "api_key",
// X-API-Key, AccountKey, sig), and label one in prose ("my API key is …").
const (
	passWords   = `password|passwd|pwd|pass|passphrase|passwort|kennwort`
	secretWords = `secret|token|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|key|auth|credentials?|sig|signature`
	// quotedValue is a value in quotes (which may hold spaces) or a bare one.
	quotedValue = `(?:"(?P<v1>[^"\n]*)"|'(?P<v2>[^'\n]*)'|(?P<v3>[^\s"',;{}\[\]()<>]+))`
)

// proseLabels name a credential in a sentence; the CJK ones need no word
// boundary.
const proseLabels = `(?:\b(?:` + passWords + `|secret|token|api[\s_\-]?key|apikey|api[\s_\-]?token|access[\s_\-]?key|access[\s_\-]?token|secret[\s_\-]?key|private[\s_\-]?key|client[\s_\-]?secret|key|credentials?|api-schlüssel|schlüssel)|密码|口令|密钥|秘钥)`

var rules = []rule{
	{"private_key", []string{"-----begin"}, regexp.MustCompile(`-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----|$)`), nil},
	// Vendor keys by their prefix and shape (gitleaks' default rules for these
	// providers): found wherever they stand, labelled or not.
	{"api_key", []string{"sk-", "aiza", "sk_", "rk_", "pk_", "whsec_", "sq0", "gsk_", "r8_", "sg.", "key-", "gocspx-", "dapi", "lin_api_"}, regexp.MustCompile(`\b(?:sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-)?[A-Za-z0-9_\-]{20,}|AIza[0-9A-Za-z_\-]{35}|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[A-Za-z0-9]{24,}|sq0(?:csp|atp)-[A-Za-z0-9_\-]{22,}|gsk_[A-Za-z0-9]{40,}|r8_[A-Za-z0-9]{30,}|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}|key-[0-9a-f]{32}|GOCSPX-[A-Za-z0-9_\-]{24,}|dapi[0-9a-f]{32}|lin_api_[A-Za-z0-9]{32,})`), nil},
	{"access_token", []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glcbt-", "gloas-", "glsa_", "glc_", "xox", "xapp-", "akia", "asia", "abia", "acca", "npm_", "hf_", "pypi-", "shp", "_v1_", ":aa"}, regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}|gl(?:pat|dt|rt|ptt|ft|cbt|oas)-[A-Za-z0-9_\-]{20,}|gl(?:sa|c)_[A-Za-z0-9_]{32,}|xox[abposr]-[A-Za-z0-9\-]{10,}|xapp-\d-[A-Za-z0-9\-]{20,}|(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}|npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{30,}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{40,}|shp(?:at|ca|pa|ss)_[A-Fa-f0-9]{32}|do[por]_v1_[a-f0-9]{64}|\d{8,10}:AA[A-Za-z0-9_\-]{32,})`), nil},
	{"webhook", []string{"hooks.slack.com", "/api/webhooks/"}, regexp.MustCompile(`(?:hooks\.slack\.com/(?:services|workflows|triggers)/|discord(?:app)?\.com/api/webhooks/)(?P<v>[A-Za-z0-9_/\-]+)`), nil},
	{"jwt", []string{"eyj"}, regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}`), nil},
	// Credentials in URLs (scheme://user:password@host, an empty user too) and
	// on command lines (curl -u user:password).
	{"password", []string{"://"}, regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.\-]*://[^\s:/@]*:(?P<v>[^\s@/]+)@`), nil},
	{"password", []string{"-u"}, regexp.MustCompile(`(?:^|\s)-u\s+["']?[^\s:"']+:(?P<v>[^\s"'@]+)`), nil},
	{"bearer_token", []string{"bearer", "basic", "authorization"}, regexp.MustCompile(`(?i)(?:\b(?:bearer|basic)\s+|\bauthorization["']?\s*[:=]\s*["']?(?:token|digest)\s+)(?P<v>[A-Za-z0-9_\-.=+/~]{16,})`), nil},
	// An assignment to a key named like a credential, in an environment file,
	// shell, YAML, JSON, INI, a URL query or a header: DB_PASSWORD=…,
	// aws_secret_access_key = …, "password": "…", X-API-Key: …, AccountKey=….
	{"secret", []string{"pass", "pwd", "secret", "token", "key", "auth", "credential", "sig", "kennwort"}, regexp.MustCompile(`(?i)(?:^|[^A-Za-z0-9_.\-])["']?(?P<k>[A-Za-z0-9_.\-]*?(?:` + passWords + `|` + secretWords + `))["']?[ \t]*(?:=>|=|:)[ \t]*` + quotedValue), assigned},
	// A Kubernetes-style env entry: "name: DB_PASSWORD" then "value: …".
	{"secret", []string{"value"}, regexp.MustCompile(`(?i)\bname:[ \t]*["']?(?P<k>[A-Za-z0-9_]*(?:` + passWords + `|` + secretWords + `))["']?[ \t]*\n[ \t]*value:[ \t]*` + quotedValue), assigned},
	// Prose: "my API key is …", "the password for the NAS is …", "Mein
	// Passwort ist …", "我的密码是…", "the admin password is now …".
	{"secret", []string{"pass", "pwd", "secret", "token", "key", "credential", "kennwort", "schlüssel", "密码", "口令", "密钥", "秘钥"}, regexp.MustCompile(`(?i)(?P<k>` + proseLabels + `)(?:\s+(?:for|of|to|on|für|von)\s+(?:the\s+|my\s+|our\s+|den\s+|die\s+|das\s+)?[\p{L}\p{N}_.\-]+(?:\s+[\p{L}\p{N}_.\-]+)?)?\s*(?:(?:\b(?:is|was|ist|war)\b|=|:|：|是|为)\s*)+(?:(?:now|still|set\s+to|jetzt)\s+)?["'\x60]?(?P<v>[^\s"'\x60,;]+)`), assigned},
	// A key-like value right after its label, no verb: "twilio auth token
	// 29c0…", "use secret 5kR4… for the webhook", "remember my access key …".
	{"secret", []string{"secret", "token", "key"}, regexp.MustCompile(`(?i)\b(?:secret|token|key)\s+["'\x60]?(?P<v>[A-Za-z0-9_\-+/=.]{16,})`), func(_, v string) bool { return strongKeyLike(v) }},
}

// assigned vets an assignment: a password needs a plausible password, any
// other credential a key-like value.
func assigned(key, value string) bool {
	if passKey.MatchString(key) {
		return passwordLike(value)
	}
	return keyLike(value)
}

// passKey: a key or label that names a password.
var passKey = regexp.MustCompile(`(?i)(?:` + passWords + `)$|密码|口令`)

// notValues are the words that follow a credential's name in ordinary text
// ("the password is required", "API key: none", "Passwort ist abgelaufen").
var notValues = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`required expired wrong incorrect invalid correct missing empty weak strong
		stored saved changed reset set sent shared stolen leaked compromised rotated revoked case-sensitive
		different same secure insecure unknown known needed optional mandatory long short hidden visible
		encrypted hashed true false null none nil yes no not also still now being here there this that what
		where your mine yours ours good bad fine okay ok easy hard simple blank generated updated outdated
		provided managed changing expiring too very in on at for from with the a an my our is was
		abgelaufen falsch richtig geändert erforderlich gespeichert leer geheim nicht noch`) {
		notValues[w] = true
	}
}

// placeholderValue is a reference to a value rather than one: ${DB_PASSWORD},
// $TOKEN, <your-key>, {{ secret }}, %(password)s, ****.
var placeholderValue = regexp.MustCompile(`^(?:\$|<|\{\{|%\(|\*+$|x+$|\.\.\.)`)

// passwordLike: at least four characters, not a word that follows "password
// is" in ordinary text, not a placeholder.
func passwordLike(v string) bool {
	return utf8.RuneCountInString(v) >= 4 && !notValues[strings.ToLower(v)] && !placeholderValue.MatchString(v)
}

// keyLike: a token a key could be, at least 8 characters with a digit or both
// cases (order_id and customer_id are not; the tokens of every provider are).
func keyLike(v string) bool {
	if len(v) < 8 || placeholderValue.MatchString(v) || notValues[strings.ToLower(v)] {
		return false
	}
	var digit, upper, lower bool
	for _, r := range v {
		switch {
		case unicode.IsDigit(r):
			digit = true
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsLower(r):
			lower = true
		}
	}
	return (digit && (upper || lower)) || (upper && lower)
}

// strongKeyLike is what an unlabelled value needs: 16 characters or more with
// letters and digits, which a word never has.
func strongKeyLike(v string) bool {
	return len(v) >= 16 && strings.ContainsAny(v, "0123456789") && strings.IndexFunc(v, unicode.IsLetter) >= 0
}

// markerRe finds the markers of an earlier pass, which Text leaves as they
// are.
var markerRe = regexp.MustCompile(`\[REDACTED:[a-z_]+\]`)

// span is a value to replace.
type span struct {
	start, end int
	kind       string
}

// Text returns text with every credential replaced by "[REDACTED:<kind>]", and
// whether it found one. Text without one is returned as is. Every rule scans
// the text with the markers of an earlier pass blanked out, and the values
// found are replaced at once (overlapping ones as one), so no text outside a
// value is lost. A replacement can give a neighbour the word boundary its
// rule wants ("…74OKgithub_pat_…" is one word until the AWS key before it is a
// marker), so Text scans again until nothing new is found: redact(redact(x))
// == redact(x). Each pass only turns text outside the markers into markers,
// so the passes end.
func Text(text string) (string, bool) {
	found := false
	for {
		out, more := redactPass(text)
		if !more {
			return text, found
		}
		text, found = out, true
	}
}

// redactPass is one scan of Text.
func redactPass(text string) (string, bool) {
	lower := strings.ToLower(text)
	scan := text
	if strings.Contains(text, "[REDACTED:") {
		scan = markerRe.ReplaceAllStringFunc(text, func(m string) string { return strings.Repeat("\x00", len(m)) })
	}
	var spans []span
	for _, r := range rules {
		if !containsAny(lower, r.keywords) {
			continue
		}
		for _, m := range r.re.FindAllStringSubmatchIndex(scan, -1) {
			if sp, ok := r.value(scan, m); ok {
				spans = append(spans, sp)
			}
		}
	}
	if len(spans) == 0 {
		return text, false
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end)) })
	var b strings.Builder
	at := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		for i++; i < len(spans) && spans[i].start < cur.end; i++ {
			cur.end = max(cur.end, spans[i].end)
		}
		b.WriteString(text[at:cur.start])
		b.WriteString(Marker(cur.kind))
		at = cur.end
	}
	b.WriteString(text[at:])
	return b.String(), true
}

// value is the span of a match m of r in scan, if it holds a credential: not
// empty, not in a marker of an earlier pass, and valid.
func (r rule) value(scan string, m []int) (span, bool) {
	sp := span{start: m[0], end: m[1], kind: r.kind}
	key := ""
	named := false
	for i, name := range r.re.SubexpNames() {
		switch {
		case m[2*i] < 0:
		case name == "k":
			key = scan[m[2*i]:m[2*i+1]]
		case strings.HasPrefix(name, "v") && !named:
			sp.start, sp.end, named = m[2*i], m[2*i+1], true
		}
	}
	v := scan[sp.start:sp.end]
	if r.valid != nil {
		// A value found by its context ends before the sentence's punctuation.
		t := strings.TrimRight(v, ".!?:)]}")
		sp.end -= len(v) - len(t)
		v = t
	}
	if v == "" || strings.Contains(v, "\x00") || r.valid != nil && !r.valid(key, v) {
		return span{}, false
	}
	if passKey.MatchString(key) {
		sp.kind = "password"
	}
	return sp, true
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
