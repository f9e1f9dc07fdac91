package docstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/agentmem/agentmem/pkg/kvcas"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
)

// Defaults of JetStreamConfig.
const (
	DefaultBucket  = "agentmem_docs"
	DefaultHistory = 16
)

const (
	// maxUpdateAttempts bounds the compare-and-set loop of JetStream.Update.
	maxUpdateAttempts = 100
	// maxKVHistory is the server's limit on history per key.
	maxKVHistory = 64
)

var bucketNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// JetStreamConfig configures the JetStream KV backend.
type JetStreamConfig struct {
	// Bucket is the KV bucket, created if missing and bound as it is otherwise.
	// Default DefaultBucket.
	Bucket string
	// History is how many revisions the bucket keeps per key when this backend
	// creates it (1..64). Default DefaultHistory.
	History uint8
	// Keyring seals every value with its user's key (kvcas.Sealed), which forget
	// erases: a KV stream denies the secure delete for good, so the revisions it
	// supersedes or purges stay in its block files until the server compacts
	// them, unreadable once the key is gone. nil keeps the values plain.
	Keyring *kvcas.Keyring
}

func (c *JetStreamConfig) setDefaults() {
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.History == 0 {
		c.History = DefaultHistory
	}
}

// Validate reports configuration errors.
func (c JetStreamConfig) Validate() error {
	if !bucketNameRe.MatchString(c.Bucket) {
		return fmt.Errorf("docstore: jetstream: bucket name %q must be non-empty and use only A-Z, a-z, 0-9, '_' and '-'", c.Bucket)
	}
	if c.History < 1 || c.History > maxKVHistory {
		return fmt.Errorf("docstore: jetstream: history %d must be between 1 and %d", c.History, maxKVHistory)
	}
	return nil
}

// JetStream stores every namespace in one KV bucket under keys
// "<tenant>.<user>.<encoded name>". Update is a compare-and-set loop on the key's
// revision, so concurrent writers on any connection never lose an update. The
// bucket's per-key history keeps earlier revisions; backups are still written as
// "backups/…" keys so both backends behave the same.
type JetStream struct {
	js       jetstream.JetStream
	bucket   string
	kv       jetstream.KeyValue
	locks    *pathLocks
	maxValue int64
	logger   *zap.Logger
}

var _ Backend = (*JetStream)(nil)

// NewJetStream binds the configured bucket, creating it when it does not exist.
func NewJetStream(ctx context.Context, cfg JetStreamConfig, js jetstream.JetStream, logger *zap.Logger) (*JetStream, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if js == nil {
		return nil, errors.New("docstore: jetstream: nil JetStream context")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	logger = logger.Named("docstore.jetstream").With(zap.String("bucket", cfg.Bucket))
	kv, err := bindOrCreate(ctx, cfg, js, logger)
	if err != nil {
		return nil, err
	}
	status, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("docstore: jetstream: status of bucket %q: %w", cfg.Bucket, err)
	}
	maxValue := js.Conn().MaxPayload()
	if limit := int64(status.Config().MaxValueSize); limit > 0 && limit < maxValue {
		maxValue = limit
	}
	if cfg.Keyring != nil {
		kv = kvcas.Sealed(kv, cfg.Keyring, kvcas.OwnerAt(0))
		maxValue -= kvcas.SealOverhead
	}
	return &JetStream{js: js, bucket: cfg.Bucket, kv: kv, locks: newPathLocks(), maxValue: maxValue, logger: logger}, nil
}

func bindOrCreate(ctx context.Context, cfg JetStreamConfig, js jetstream.JetStream, logger *zap.Logger) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("docstore: jetstream: bind bucket %q: %w", cfg.Bucket, err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "agentmem Markdown memory (docstore)",
		History:     cfg.History,
		Storage:     jetstream.FileStorage,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		// Another process created it first, possibly with other settings: bind theirs.
		kv, err = js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("docstore: jetstream: create bucket %q: %w", cfg.Bucket, err)
	}
	logger.Info("created docstore bucket", zap.Uint8("history", cfg.History))
	return kv, nil
}

// key validates ns and name and returns the KV key.
func (j *JetStream) key(ns Namespace, name string) (string, error) {
	if err := ns.Validate(); err != nil {
		return "", err
	}
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return nsPrefix(ns) + encodeKeyName(name), nil
}

func nsPrefix(ns Namespace) string { return ns.Tenant + "." + ns.User + "." }

// Read implements Backend: ReadIfChanged against the zero Version, which no
// file matches.
func (j *JetStream) Read(ctx context.Context, ns Namespace, name string) ([]byte, error) {
	data, _, _, err := j.ReadIfChanged(ctx, ns, name, Version{})
	return data, err
}

// ReadIfChanged implements Backend. The KV read is the check: a key's revision is
// a stream sequence, never reused while the bucket exists, and the creation time
// tells a recreated bucket's revisions apart. An unchanged file saves the caller
// its own work on the content, not the round trip.
func (j *JetStream) ReadIfChanged(ctx context.Context, ns Namespace, name string, since Version) ([]byte, Version, bool, error) {
	key, err := j.key(ns, name)
	if err != nil {
		return nil, Version{}, false, err
	}
	e, err := j.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, Version{}, false, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, Version{}, false, fmt.Errorf("docstore: read %s: %w", name, err)
	}
	v := Version{e.Revision(), uint64(e.Created().UnixNano())}
	if v == since {
		return nil, v, false, nil
	}
	return e.Value(), v, true, nil
}

// Update implements Backend with compare-and-set on the key's revision: a lost race
// re-reads and calls fn again, after a short jittered pause so that contending
// writers spread out. Writers of this process queue on an in-process lock per key
// first, so CAS conflicts (and wasted calls of fn) only arise between processes.
func (j *JetStream) Update(ctx context.Context, ns Namespace, name string, fn func(old []byte, exists bool) ([]byte, error)) error {
	key, err := j.key(ns, name)
	if err != nil {
		return err
	}
	unlock, err := j.locks.lock(ctx, key)
	if err != nil {
		return fmt.Errorf("docstore: update %s: %w", name, err)
	}
	defer unlock()
	_, err = kvcas.UpdateKV(ctx, j.kv, key, maxUpdateAttempts, func(old []byte, exists bool) ([]byte, error) {
		data, err := fn(old, exists)
		if err != nil {
			return nil, err
		}
		if err := j.checkSize(name, data); err != nil {
			return nil, err
		}
		return data, nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kvcas.ErrCASConflict):
		return fmt.Errorf("%w: %s changed under %d consecutive update attempts", ErrConflict, name, maxUpdateAttempts)
	case errors.Is(err, nats.ErrMaxPayload):
		return j.writeError(name, err)
	default:
		return err // fn's own error, or a read/write failure that already names the key
	}
}

// Put implements Backend.
func (j *JetStream) Put(ctx context.Context, ns Namespace, name string, data []byte) error {
	key, err := j.key(ns, name)
	if err != nil {
		return err
	}
	if err := j.checkSize(name, data); err != nil {
		return err
	}
	if _, err := j.kv.Put(ctx, key, data); err != nil {
		return j.writeError(name, err)
	}
	return nil
}

// Delete implements Backend. It places a delete marker, so the key's history stays.
func (j *JetStream) Delete(ctx context.Context, ns Namespace, name string) error {
	key, err := j.key(ns, name)
	if err != nil {
		return err
	}
	if _, err := j.kv.Get(ctx, key); errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil // no marker for a key that has none to hide
	}
	if err := j.kv.Delete(ctx, key); err != nil {
		return fmt.Errorf("docstore: delete %s: %w", name, err)
	}
	return nil
}

// List implements Backend.
func (j *JetStream) List(ctx context.Context, ns Namespace, dir string) ([]string, error) {
	if err := ns.Validate(); err != nil {
		return nil, err
	}
	if err := validateDir(dir); err != nil {
		return nil, err
	}
	prefix := nsPrefix(ns)
	// Encoded names have no '.', so each is exactly one subject token.
	lister, err := j.kv.ListKeysFiltered(ctx, prefix+"*")
	if err != nil {
		return nil, fmt.Errorf("docstore: list %q: %w", dir, err)
	}
	defer func() { _ = lister.Stop() }()
	seen := make(map[string]bool)
	var names []string
	for key := range lister.Keys() {
		name, ok := decodeKeyName(strings.TrimPrefix(key, prefix))
		if !ok || seen[name] || ValidateName(name) != nil || (dir != "" && !strings.HasPrefix(name, dir+"/")) {
			continue
		}
		seen[name] = true
		names = append(names, name)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("docstore: list %q: %w", dir, err)
	}
	sort.Strings(names)
	return names, nil
}

func (j *JetStream) checkSize(name string, data []byte) error {
	if int64(len(data)) > j.maxValue {
		return fmt.Errorf("%w: %s is %d bytes, the bucket stores at most %d per value", ErrTooLarge, name, len(data), j.maxValue)
	}
	return nil
}

func (j *JetStream) writeError(name string, err error) error {
	if errors.Is(err, nats.ErrMaxPayload) {
		// The value fit, but not with the message headers.
		return fmt.Errorf("%w: %s with its headers exceeds the server's max payload of %d bytes: %w", ErrTooLarge, name, j.maxValue, err)
	}
	return fmt.Errorf("docstore: write %s: %w", name, err)
}

// encodeKeyName makes a name one KV key token: bytes outside [A-Za-z0-9_/-],
// including '.' (the token separator, which may not lead, trail or repeat in a key)
// and '=' (the escape), become "=XX" in upper-case hex. The mapping is injective,
// so decodeKeyName inverts it.
func encodeKeyName(name string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xF])
	}
	return b.String()
}

// decodeKeyName inverts encodeKeyName; ok is false for a token it cannot have made.
func decodeKeyName(token string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(token); i++ {
		if token[i] != '=' {
			b.WriteByte(token[i])
			continue
		}
		if i+2 >= len(token) {
			return "", false
		}
		hi, ok1 := unhex(token[i+1])
		lo, ok2 := unhex(token[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	name := b.String()
	return name, encodeKeyName(name) == token
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Users implements Backend: the second token of the tenant's keys.
func (j *JetStream) Users(ctx context.Context, tenant string) ([]string, error) {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidNamespace, err)
	}
	users, err := j.keyTokens(ctx, tenant+".*.*", 1, "user")
	if err != nil {
		return nil, fmt.Errorf("docstore: users of %s: %w", tenant, err)
	}
	return users, nil
}

// Tenants implements Backend: the first token of every key.
func (j *JetStream) Tenants(ctx context.Context) ([]string, error) {
	tenants, err := j.keyTokens(ctx, "*.*.*", 0, "tenant")
	if err != nil {
		return nil, fmt.Errorf("docstore: tenants: %w", err)
	}
	return tenants, nil
}

// keyTokens returns the distinct, sorted token i of the keys matching filter
// that are valid ids of kind.
func (j *JetStream) keyTokens(ctx context.Context, filter string, i int, kind string) ([]string, error) {
	lister, err := j.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, err
	}
	defer func() { _ = lister.Stop() }()
	seen := make(map[string]bool)
	for key := range lister.Keys() {
		if parts := strings.Split(key, "."); len(parts) == 3 && events.ValidateID(kind, parts[i]) == nil {
			seen[parts[i]] = true
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// DeleteNamespace implements Backend: the namespace's keys are purged from the
// bucket's stream, so neither their history nor a delete marker remains.
func (j *JetStream) DeleteNamespace(ctx context.Context, ns Namespace) (int, error) {
	if err := ns.Validate(); err != nil {
		return 0, err
	}
	n, err := kvcas.PurgeKeys(ctx, j.js, j.bucket, nsPrefix(ns)+"*")
	if err != nil {
		return n, fmt.Errorf("docstore: delete %s/%s: %w", ns.Tenant, ns.User, err)
	}
	return n, nil
}
