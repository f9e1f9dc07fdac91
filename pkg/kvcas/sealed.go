package kvcas

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Why values of a user are sealed: a KV bucket keeps one revision per key, and
// the server drops the one an update supersedes without overwriting it (a KV
// stream denies the secure delete, for good), so its bytes stay in the block
// file until the server happens to compact the block. Sealed with a key of the
// user that forget erases, what stays there is unreadable: the user's content
// is gone from the disk (crypto-erasure) while the buckets keep working as
// before for every other user.

// DefaultKeyringStream is the stream that holds the users' data keys.
const DefaultKeyringStream = "agentmem_keys"

// keySubjectPrefix starts the subject of each key: "<prefix>.<tenant>.<user>".
const keySubjectPrefix = "amkeys"

// maxCachedKeys bounds a Keyring's cache; past it the cache starts over.
// keyCacheTTL is how long a process uses a cached key before reading it again:
// once another process erased it, values are sealed with it for at most that
// long (and read as forgotten).
const (
	maxCachedKeys = 1 << 16
	keyCacheTTL   = 30 * time.Second
)

// sealMagic starts a sealed value: a JSON value (what the buckets held before
// they were sealed) never starts with a NUL byte.
var sealMagic = []byte{0, 'a', 'm', 's', '1'}

// SealOverhead is how many bytes sealing adds to a value: sealMagic, the
// AES-GCM nonce and its tag. A store with a value size limit keeps this much free.
const SealOverhead = 5 + 12 + 16

// ErrSealed reports a sealed value that cannot be opened: its key is
// missing or does not open it.
var ErrSealed = errors.New("kvcas: sealed value")

// KeyringConfig configures a Keyring.
type KeyringConfig struct {
	Stream string // default DefaultKeyringStream
}

// Keyring holds one random AES-256 key per (tenant, user), each the only
// message of its subject in a stream that allows the secure delete: Erase
// overwrites it, and every value sealed with it is unreadable from then on.
// Keys are cached per process for keyCacheTTL: a key erased by another
// process (forget runs in the retriever) stays in use here that long at most.
type Keyring struct {
	js     jetstream.JetStream
	stream jetstream.Stream

	mu    sync.Mutex
	cache map[string]cachedKey // by "<tenant>.<user>"
}

type cachedKey struct {
	key    []byte
	loaded time.Time
}

// NewKeyring creates (or binds) the keyring's stream.
func NewKeyring(ctx context.Context, js jetstream.JetStream, cfg KeyringConfig) (*Keyring, error) {
	if cfg.Stream == "" {
		cfg.Stream = DefaultKeyringStream
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "agentmem: one data key per user, erased by forget",
		Subjects:    []string{keySubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: keyring stream %s: %w", ErrProvision, cfg.Stream, err)
	}
	return &Keyring{js: js, stream: st, cache: map[string]cachedKey{}}, nil
}

func keySubject(tenant, user string) string { return keySubjectPrefix + "." + tenant + "." + user }

// key returns the user's key; with create, one is made when there is none,
// otherwise a missing key is ErrSealed.
func (k *Keyring) key(ctx context.Context, tenant, user string, create bool) ([]byte, error) {
	ns := tenant + "." + user
	k.mu.Lock()
	c, ok := k.cache[ns]
	k.mu.Unlock()
	if ok && time.Since(c.loaded) < keyCacheTTL {
		return c.key, nil
	}
	key, err := k.load(ctx, tenant, user)
	if errors.Is(err, jetstream.ErrMsgNotFound) && create {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
		// Only the first key of a subject is stored: another process that made
		// one meanwhile wins, and its key is read back.
		if _, perr := k.js.Publish(ctx, keySubject(tenant, user), key, jetstream.WithExpectLastSequencePerSubject(0)); perr != nil {
			key, err = k.load(ctx, tenant, user)
		} else {
			err = nil
		}
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: no key for %s (forgotten)", ErrSealed, ns)
	}
	if err != nil {
		return nil, fmt.Errorf("kvcas: key of %s: %w", ns, err)
	}
	k.mu.Lock()
	if len(k.cache) >= maxCachedKeys {
		clear(k.cache)
	}
	k.cache[ns] = cachedKey{key: key, loaded: time.Now()}
	k.mu.Unlock()
	return key, nil
}

func (k *Keyring) load(ctx context.Context, tenant, user string) ([]byte, error) {
	reqCtx, cancel := WithRequestTimeout(ctx)
	defer cancel()
	m, err := k.stream.GetLastMsgForSubject(reqCtx, keySubject(tenant, user))
	if err != nil {
		return nil, NoReply(ctx, err)
	}
	if len(m.Data) != 32 {
		return nil, fmt.Errorf("%w: key %s has %d bytes", ErrSealed, m.Subject, len(m.Data))
	}
	return m.Data, nil
}

// Erase overwrites the user's key (JetStream's secure delete), so that every
// value sealed with it can never be opened again. A user without a key has
// nothing to erase.
func (k *Keyring) Erase(ctx context.Context, tenant, user string) error {
	k.mu.Lock()
	delete(k.cache, tenant+"."+user)
	k.mu.Unlock()
	m, err := k.stream.GetLastMsgForSubject(ctx, keySubject(tenant, user))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kvcas: erase key of %s.%s: %w", tenant, user, err)
	}
	if err := k.stream.SecureDeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("kvcas: erase key of %s.%s: %w", tenant, user, err)
	}
	return nil
}

// Owner names the user a KV key belongs to.
type Owner func(key string) (tenant, user string, ok bool)

// OwnerAt is the Owner of keys whose tokens i and i+1 are the tenant and the
// user ("<tenant>.<user>.<session>": OwnerAt(0)).
func OwnerAt(i int) Owner {
	return func(key string) (string, string, bool) {
		p := strings.Split(key, ".")
		if len(p) < i+2 {
			return "", "", false
		}
		return p[i], p[i+1], true
	}
}

// Sealed returns kv whose values are sealed (AES-GCM, bound to their key) with
// the key of the user owner names: Put, Create and Update seal, Get and
// GetRevision open. A key no user owns keeps its value plain, and so does a
// nil ring. A value written before the bucket was sealed is read as it is;
// one sealed with an erased key reads as jetstream.ErrKeyNotFound: the user
// was forgotten. Watches, listings and History return values as stored.
func Sealed(kv jetstream.KeyValue, ring *Keyring, owner Owner) jetstream.KeyValue {
	if ring == nil {
		return kv
	}
	return sealedKV{KeyValue: kv, ring: ring, owner: owner}
}

type sealedKV struct {
	jetstream.KeyValue
	ring  *Keyring
	owner Owner
}

// openedEntry is an entry with its value opened.
type openedEntry struct {
	jetstream.KeyValueEntry
	value []byte
}

func (e openedEntry) Value() []byte { return e.value }

func (s sealedKV) aead(ctx context.Context, key string, create bool) (cipher.AEAD, error) {
	tenant, user, ok := s.owner(key)
	if !ok {
		return nil, nil
	}
	k, err := s.ring.key(ctx, tenant, user, create)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func (s sealedKV) seal(ctx context.Context, key string, value []byte) ([]byte, error) {
	a, err := s.aead(ctx, key, true)
	if err != nil || a == nil {
		return value, err
	}
	out := make([]byte, len(sealMagic)+a.NonceSize(), len(sealMagic)+a.NonceSize()+len(value)+a.Overhead())
	copy(out, sealMagic)
	_, _ = rand.Read(out[len(sealMagic):])
	return a.Seal(out, out[len(sealMagic):], value, []byte(key)), nil
}

func (s sealedKV) open(ctx context.Context, e jetstream.KeyValueEntry, err error) (jetstream.KeyValueEntry, error) {
	if err != nil || !bytes.HasPrefix(e.Value(), sealMagic) {
		return e, err
	}
	a, err := s.aead(ctx, e.Key(), false)
	if errors.Is(err, ErrSealed) {
		return nil, fmt.Errorf("%w: %s: %w", jetstream.ErrKeyNotFound, e.Key(), err)
	}
	if err != nil {
		return nil, err
	}
	v := e.Value()[len(sealMagic):]
	if a == nil || len(v) < a.NonceSize() {
		return nil, fmt.Errorf("%w: %s is sealed but cannot be opened", ErrSealed, e.Key())
	}
	plain, err := a.Open(nil, v[:a.NonceSize()], v[a.NonceSize():], []byte(e.Key()))
	if err != nil {
		// Sealed with a key since erased and made anew: the user was forgotten.
		return nil, fmt.Errorf("%w: %s: %w: %w", jetstream.ErrKeyNotFound, e.Key(), ErrSealed, err)
	}
	return openedEntry{KeyValueEntry: e, value: plain}, nil
}

func (s sealedKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	e, err := s.KeyValue.Get(ctx, key)
	return s.open(ctx, e, err)
}

func (s sealedKV) GetRevision(ctx context.Context, key string, revision uint64) (jetstream.KeyValueEntry, error) {
	e, err := s.KeyValue.GetRevision(ctx, key, revision)
	return s.open(ctx, e, err)
}

func (s sealedKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	v, err := s.seal(ctx, key, value)
	if err != nil {
		return 0, err
	}
	return s.KeyValue.Put(ctx, key, v)
}

func (s sealedKV) PutString(ctx context.Context, key string, value string) (uint64, error) {
	return s.Put(ctx, key, []byte(value))
}

func (s sealedKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	v, err := s.seal(ctx, key, value)
	if err != nil {
		return 0, err
	}
	return s.KeyValue.Create(ctx, key, v, opts...)
}

func (s sealedKV) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	v, err := s.seal(ctx, key, value)
	if err != nil {
		return 0, err
	}
	return s.KeyValue.Update(ctx, key, v, revision)
}
