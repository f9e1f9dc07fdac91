package extract

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/kvcas"
	"github.com/agentmem/agentmem/pkg/markdown"
)

// Agent learning (issue 31, memory.agent_learning): of a session's extracted
// entries, those that hold for any user the agent serves are promoted to the
// agent's scope: error→fix pairs and procedures. An entry that names or
// describes a user is never promoted, whatever the extractor (rules or model)
// made of it: Personal is the post-filter every promoted entry passes.

var (
	emailRe = regexp.MustCompile(`[\w.+-]+@[\w-]+\.[\w.-]+`)
	// phoneRe: seven or more digits in one number, spaced or dashed.
	phoneRe = regexp.MustCompile(`\+?\d(?:[\s().-]?\d){6,}`)
	// aboutSomeoneRe: the entry speaks of a person (the user, a customer) or
	// of the speaker, not of how a task is done.
	aboutSomeoneRe = regexp.MustCompile(`(?i)\b(?:i|i'm|i've|i'd|me|my|mine|myself|we|our|us|he|she|his|her|him|their|them|user|user's|customer|customer's|client|client's|address|phone|email|birthday|born|lives?)\b`)
	// preferenceRe: a taste or habit, which is a user's (user_prefs.md).
	preferenceRe = regexp.MustCompile(`(?i)\b(?:prefers?|preferred|preference|likes?|loves?|hates?|dislikes?|favou?rite|wants?|usually|always uses)\b`)
	// theirFileRe: a file of theirs; what it holds is their data.
	theirFileRe = regexp.MustCompile(`(?i)\b[\w-]+\.(?:csv|tsv|xlsx?|xlsm|json|txt|pdf|docx?|pptx?|parquet|xml|md|zip)\b`)
	// introRe finds the names people give in a session.
	introRe = regexp.MustCompile(`(?:(?i:my name is|i'm|i am|call me|this is|ich bin|ich heiße)\s+)(\p{Lu}\p{Ll}+(?:\s+\p{Lu}\p{Ll}+)?)`)
	// procedureRe: a general entry that says how to do something.
	procedureRe = regexp.MustCompile(`(?i)^(?:to\s+[^,]{3,80},\s*)?(?:run|use|call|open|click|set|restart|install|upgrade|pass|add|remove|enable|disable|select|switch|update|retry|reset|clear|export|import|convert|rename|check|wait|log in|sign in|escalate)\b|\b(?:first\b.+\bthen|step\s+\d)\b`)
)

// Personal reports whether text names or describes a person: contact data, a
// name given in the session (names), words about someone (the user, a
// customer, the speaker), a preference, a file of theirs, or an identifier
// (an order, account or customer number).
func Personal(text string, names []string) bool {
	if emailRe.MatchString(text) || phoneRe.MatchString(text) || aboutSomeoneRe.MatchString(text) ||
		preferenceRe.MatchString(text) || theirFileRe.MatchString(text) || hasIdentifier(text) {
		return true
	}
	lower := strings.ToLower(text)
	for _, n := range names {
		if strings.Contains(lower, strings.ToLower(n)) {
			return true
		}
	}
	return false
}

// hasIdentifier reports a token that looks like someone's record number: five
// or more digits, or six or more characters mixing at least two digits and
// two capitals ("ORD-482913", "PR7K2M9Q"). Short codes ("E42", "404") pass.
func hasIdentifier(text string) bool {
	for _, tok := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' }) {
		digits, upper, run, maxRun := 0, 0, 0, 0
		for _, r := range tok {
			switch {
			case unicode.IsDigit(r):
				digits++
				run++
				maxRun = max(maxRun, run)
				continue
			case unicode.IsUpper(r):
				upper++
			}
			run = 0
		}
		if maxRun >= 5 || len(tok) >= 6 && digits >= 2 && upper >= 2 {
			return true
		}
	}
	return false
}

// SessionNames returns the names people give in conv ("my name is Dana
// Whitfield", "I'm Ravi"), and userID: an entry holding one is about that
// person.
func SessionNames(conv []Message, userID string) []string {
	names := []string{userID}
	for _, m := range conv {
		for _, g := range introRe.FindAllStringSubmatch(m.Text, -1) {
			names = append(names, strings.Fields(g[1])...)
		}
	}
	return names
}

// Lesson reports whether e is to be promoted to the agent's scope: an
// error→fix pair or a procedure, not Personal (names: SessionNames).
func Lesson(e Extracted, names []string) bool {
	lesson := e.Category == markdown.CategoryErrorSolution || e.Category == markdown.CategoryGeneral && procedureRe.MatchString(e.Content)
	return lesson && !Personal(e.Content, names)
}

// agentLessons returns the entries of a session to promote (Lesson).
func agentLessons(entries []storedEntry, conv []Message, userID string) []storedEntry {
	names := SessionNames(conv, userID)
	var out []storedEntry
	for _, e := range entries {
		if Lesson(Extracted{Category: e.Category, Content: e.Content}, names) {
			out = append(out, e)
		}
	}
	return out
}

// LearnedProvenance is where an agent-scope entry was learned: the sessions
// and users it came from. It is kept in the extractor's state bucket under
// learnedKey, never in the agent's memory, which every user's pack of the
// agent shows: only the operator, who reads the buckets, sees it.
type LearnedProvenance struct {
	Category markdown.Category `json:"category"`
	Content  string            `json:"content"`
	// Sources are the sessions it was learned in, each with its user, oldest
	// first (the latest maxProvenance).
	Sources []LearnedSource `json:"sources"`
	// Forgotten counts the sources removed because their user was forgotten
	// (ForgetLearnedFrom): the lesson stays, its source is no longer named.
	Forgotten int `json:"forgotten,omitempty"`
}

// LearnedSource is one session a lesson was learned in.
type LearnedSource struct {
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
}

// legacyProvenance is a record's shape before its sources paired each session
// with its user (two unpaired lists), read so that a forget reaches it too.
type legacyProvenance struct {
	LearnedProvenance
	Sessions []string `json:"sessions"`
	Users    []string `json:"users"`
}

// decodeProvenance reads the provenance record stored under key, of either
// shape. An old record's sessions become sources of its user; where it names
// several users, which session was whose is unknown, so each user becomes a
// source without a session and the sessions are dropped: a forget must be able
// to remove everything of its user.
func decodeProvenance(key string, data []byte) (LearnedProvenance, error) {
	var l legacyProvenance
	if err := json.Unmarshal(data, &l); err != nil {
		return LearnedProvenance{}, fmt.Errorf("%w: %s: %w", ErrState, key, err)
	}
	p := l.LearnedProvenance
	var migrated []LearnedSource
	switch {
	case len(l.Users) == 1:
		for _, session := range l.Sessions {
			migrated = append(migrated, LearnedSource{UserID: l.Users[0], SessionID: session})
		}
	default:
		for _, user := range l.Users {
			migrated = append(migrated, LearnedSource{UserID: user})
		}
	}
	for _, src := range migrated {
		if !slices.Contains(p.Sources, src) {
			p.Sources = append(p.Sources, src)
		}
	}
	return p, nil
}

// maxProvenance bounds the sources a provenance record lists.
const maxProvenance = 100

// learnedKey is the state bucket key of an agent-scope entry's provenance:
// "<tenant>.<agent owner>.learned-<digest of the content>". No session has it:
// the owner id is reserved (events.AgentOwner).
func learnedKey(tenant, agentID, content string) string {
	sum := sha256.Sum256([]byte(content))
	return tenant + "." + events.AgentOwner(agentID) + "." + learnedPrefix + hex.EncodeToString(sum[:8])
}

// learnedPrefix starts the last token of a learnedKey.
const learnedPrefix = "learned-"

// ReadProvenance returns where an agent-scope entry was learned, from the
// state bucket (bucket; "" is DefaultStateBucket) opened with keyring (nil:
// values plain), for the operator's tools and tests.
func ReadProvenance(ctx context.Context, js jetstream.JetStream, keyring *kvcas.Keyring, bucket, tenant, agentID, content string) (LearnedProvenance, error) {
	kv, err := stateBucket(ctx, js, keyring, bucket)
	if err != nil {
		return LearnedProvenance{}, err
	}
	key := learnedKey(tenant, agentID, content)
	e, err := kv.Get(ctx, key)
	if err != nil {
		return LearnedProvenance{}, fmt.Errorf("extract: provenance %s: %w", key, err)
	}
	return decodeProvenance(key, e.Value())
}

// stateBucket opens the state bucket (bucket; "" is DefaultStateBucket) with
// keyring (nil: values plain).
func stateBucket(ctx context.Context, js jetstream.JetStream, keyring *kvcas.Keyring, bucket string) (jetstream.KeyValue, error) {
	if bucket == "" {
		bucket = DefaultStateBucket
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("extract: provenance: %w", err)
	}
	return kvcas.Sealed(kv, keyring, kvcas.OwnerAt(0)), nil
}

// ForgetLearnedFrom removes userID from the provenance of every lesson learned
// in tenant (forget of a user): the sources of the user's sessions are
// dropped and counted in Forgotten. The lessons stay, also one learned from
// that user alone: each passed the personal filter (Lesson), so it is the
// agent's knowledge, not the user's data. It returns how many provenance
// records changed; a deployment without the state bucket has none.
//
// The records are found by listing the tenant's keys of the bucket (the
// agent owner is a token of its own, learnedKey): a forget reads every key
// of the tenant there once.
func ForgetLearnedFrom(ctx context.Context, js jetstream.JetStream, keyring *kvcas.Keyring, bucket, tenant, userID string) (int, error) {
	kv, err := stateBucket(ctx, js, keyring, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	lister, err := kv.ListKeysFiltered(ctx, tenant+".*.*")
	if err != nil {
		return 0, fmt.Errorf("extract: list the provenance of %s: %w", tenant, err)
	}
	var keys []string
	for key := range lister.Keys() {
		if owner, rest, _ := strings.Cut(strings.TrimPrefix(key, tenant+"."), "."); events.OwnerScope(owner) == events.MemoryScopeAgent && strings.HasPrefix(rest, learnedPrefix) {
			keys = append(keys, key)
		}
	}
	changed := 0
	for _, key := range keys {
		_, err := kvcas.UpdateKV(ctx, kv, key, 0, func(old []byte, exists bool) ([]byte, error) {
			if !exists {
				return nil, errUnchanged
			}
			p, err := decodeProvenance(key, old)
			if err != nil {
				return nil, err
			}
			kept := slices.DeleteFunc(slices.Clone(p.Sources), func(s LearnedSource) bool { return s.UserID == userID })
			if len(kept) == len(p.Sources) {
				return nil, errUnchanged
			}
			p.Forgotten += len(p.Sources) - len(kept)
			p.Sources = kept
			return json.Marshal(p)
		})
		switch {
		case err == nil:
			changed++
		case !errors.Is(err, errUnchanged):
			return changed, fmt.Errorf("extract: forget %s in %s: %w", userID, key, err)
		}
	}
	return changed, nil
}

// learn appends the session's lessons to its agent's scope and records where
// each came from. Both are idempotent: the docstore skips an entry it holds,
// and a provenance record lists a session and a user once.
func (w *Worker) learn(ctx context.Context, env events.Envelope, lessons []storedEntry) error {
	if len(lessons) == 0 {
		return nil
	}
	entries := make([]markdown.Entry, len(lessons))
	for i, e := range lessons {
		entries[i] = markdown.Entry{Time: e.Time, Category: e.Category, Content: e.Content}
	}
	ns := docstore.Namespace{Tenant: env.Tenant, User: events.AgentOwner(env.AgentID)}
	if _, err := w.deps.Docs.AppendEntries(ctx, ns, entries); err != nil {
		return fmt.Errorf("extract: write the lessons of session %s to agent %s: %w", env.SessionID, env.AgentID, err)
	}
	for _, e := range lessons {
		key := learnedKey(env.Tenant, env.AgentID, e.Content)
		_, err := kvcas.UpdateKV(ctx, w.state, key, 0, func(old []byte, exists bool) ([]byte, error) {
			p := LearnedProvenance{Category: e.Category, Content: e.Content}
			if exists {
				var err error
				if p, err = decodeProvenance(key, old); err != nil {
					return nil, err
				}
			}
			src := LearnedSource{UserID: env.UserID, SessionID: env.SessionID}
			if slices.Contains(p.Sources, src) {
				return nil, errUnchanged
			}
			p.Sources = append(p.Sources, src)
			p.Sources = p.Sources[max(0, len(p.Sources)-maxProvenance):]
			return json.Marshal(p)
		})
		if err != nil && !errors.Is(err, errUnchanged) {
			return fmt.Errorf("extract: provenance of a lesson of session %s: %w", env.SessionID, err)
		}
	}
	return nil
}

// errUnchanged aborts an UpdateKV that has nothing to write.
var errUnchanged = errors.New("unchanged")
