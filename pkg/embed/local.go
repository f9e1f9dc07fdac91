package embed

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/agentmem/agentmem/pkg/bm25"
)

// DefaultLocalDimensions matches the common small sentence-embedding models, so the
// vector store's dimension does not change when switching to a remote 384-d model.
const DefaultLocalDimensions = 384

// Feature weights. Whole words carry the meaning, so they dominate; bigrams reward
// shared phrases ("peking university"); character trigrams give partial credit to
// inflections and near-spellings ("student" ~ "study") without a stemmer.
const (
	unigramWeight = 1.0
	bigramWeight  = 0.5
	trigramWeight = 0.25
)

// Feature kinds, hashed in first so a word, a bigram and a trigram with the same
// bytes never share a feature.
const (
	kindUnigram byte = 'u'
	kindBigram  byte = 'b'
	kindTrigram byte = 't'
)

// LocalConfig configures the Local embedder.
type LocalConfig struct {
	// Dimensions is the vector length; default DefaultLocalDimensions.
	Dimensions int
}

func (c *LocalConfig) setDefaults() {
	if c.Dimensions == 0 {
		c.Dimensions = DefaultLocalDimensions
	}
}

// Validate reports configuration errors.
func (c LocalConfig) Validate() error {
	if c.Dimensions < 1 || c.Dimensions > 65536 {
		return fmt.Errorf("%w: local embedder Dimensions is %d, want 1..65536", ErrInvalidConfig, c.Dimensions)
	}
	return nil
}

// Local is a deterministic lexical embedder: signed feature hashing of word unigrams,
// word bigrams and character trigrams of words, with sublinear term frequency
// (1+ln tf), L2-normalised. It is not semantic (synonyms do not match), but texts
// that share words, phrases or word stems get a high cosine, which is what the
// offline pipeline and the tests need. Safe for concurrent use.
type Local struct {
	dims int
}

// NewLocal returns a Local embedder.
func NewLocal(cfg LocalConfig) (*Local, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Local{dims: cfg.Dimensions}, nil
}

// Dimensions implements Embedder.
func (l *Local) Dimensions() int { return l.dims }

// Name implements Embedder. The version changes whenever the feature scheme does,
// because vectors from two schemes are not comparable.
func (l *Local) Name() string { return fmt.Sprintf("local-hash-v2-%d", l.dims) }

// Embed implements Embedder. It never fails except on a cancelled context. A text
// without tokens (empty, only punctuation or stopwords) gives the zero vector, whose
// cosine with anything is 0.
func (l *Local) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("embed: local: %w", err)
		}
		out[i] = l.embed(t)
	}
	return out, nil
}

// features counts the hashed features of one text. Embed reuses them through
// featurePool: a map sized for a message's features is most of what embedding
// one would allocate.
type features struct {
	// slot of each feature in list, keyed by its 64-bit hash: collisions at 64 bits
	// are negligible, and the hash is needed anyway for the bucket and the sign.
	slot map[uint64]int
	// list holds the features in first-seen order, so the float sums run in the
	// same order on every call (map order is random and float addition is not
	// associative), and summing them needs no map lookups.
	list []feature
}

type feature struct {
	hash       uint64
	tf, weight float64
}

var featurePool = sync.Pool{New: func() any { return &features{slot: map[uint64]int{}} }}

func (fs *features) add(h fnv64, w float64) {
	i, seen := fs.slot[uint64(h)]
	if !seen {
		i = len(fs.list)
		fs.slot[uint64(h)] = i
		fs.list = append(fs.list, feature{hash: uint64(h)})
	}
	fs.list[i].tf++
	fs.list[i].weight = w
}

// addTrigrams adds the character trigrams of w padded with '#' at both ends.
// Runes are read as a []rune conversion reads them (an invalid byte is
// utf8.RuneError), and each trigram is hashed as the UTF-8 of its three runes.
func (fs *features) addTrigrams(w string) {
	var window [3]rune
	n := 0
	push := func(r rune) {
		window[0], window[1], window[2] = window[1], window[2], r
		if n++; n >= 3 {
			fs.add(newFNV64(kindTrigram).rune(window[0]).rune(window[1]).rune(window[2]), trigramWeight)
		}
	}
	push('#')
	for _, r := range w {
		push(r)
	}
	push('#')
}

func (l *Local) embed(text string) []float32 {
	words := bm25.Tokenize(text)
	fs := featurePool.Get().(*features)
	defer func() {
		clear(fs.slot)
		fs.list = fs.list[:0]
		featurePool.Put(fs)
	}()
	for i, w := range words {
		fs.add(newFNV64(kindUnigram).string(w), unigramWeight)
		if i > 0 {
			fs.add(newFNV64(kindBigram).string(words[i-1]).byte(' ').string(w), bigramWeight)
		}
		fs.addTrigrams(w)
	}
	v := make([]float32, l.dims)
	for _, f := range fs.list {
		x := f.weight
		// Most features occur once, and 1+ln 1 is exactly 1.
		if f.tf > 1 {
			x *= 1 + math.Log(f.tf)
		}
		// The top bit picks the sign so that colliding features cancel on average
		// instead of piling up (the "signed hashing trick").
		if f.hash>>63 == 1 {
			x = -x
		}
		v[f.hash%uint64(l.dims)] += float32(x)
	}
	Normalize(v)
	return v
}
