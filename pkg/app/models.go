package app

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/embed"
)

// ErrModelConfig reports a model configuration that cannot work: a key file that
// is missing or unreadable, a URL that does not parse, an embedder whose vectors
// do not have embed.dimensions, or an endpoint that refuses the key or model.
var ErrModelConfig = errors.New("app: model configuration")

// embedderCheckTimeout bounds the start-up call to a remote embedder.
const embedderCheckTimeout = 3 * time.Second

// checkEmbedder embeds one text with a remote embedder at start: vectors of
// another length than embed.dimensions, or a refused request (wrong key,
// unknown model), stop the start with ErrModelConfig. An endpoint that does not
// answer is only logged: reads degrade to BM25 until it does, and writes wait.
func (rt *Runtime) checkEmbedder(ctx context.Context) error {
	// The client itself, not through the breaker: a start-up check that fails
	// must not open the circuit for the workers.
	o, ok := remoteEmbedder(rt.Embedder)
	if !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, embedderCheckTimeout)
	defer cancel()
	_, err := o.Embed(cctx, []string{"agentmem start-up check"})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, embed.ErrDimension):
		return fmt.Errorf("%w: embed.dimensions is %d but the embedder answers otherwise: %w", ErrModelConfig, o.Dimensions(), err)
	case errors.Is(err, embed.ErrRejected):
		return fmt.Errorf("%w: the embedder refused the start-up check (embed.model, embed.api_key_file?): %w", ErrModelConfig, err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	rt.Logger.Warn("embedder does not answer at start; reads rank by BM25 until it does", zap.Error(err))
	return nil
}

// Models describes the chat model and the embedder in use, one line each, with
// endpoints without credentials: what `agentmem up` prints.
func (rt *Runtime) Models() (chat, embedder string) {
	chat = "none (offline rule-based processors)"
	if rt.LLM != nil {
		chat = rt.Config.LLM.Model + " at " + rt.LLM.Endpoint()
	}
	dims := strconv.Itoa(rt.Embedder.Dimensions()) + " dimensions"
	embedder = "local (built-in, lexical, " + dims + "; recall ranks by BM25)"
	if rt.Config.Embed.Provider == config.EmbedProviderUSELite {
		weights := "int8 weights built into the binary"
		if dir := rt.Config.Embed.ModelDir; dir != "" {
			weights = "float32 weights from " + dir
		}
		embedder = "use-lite (built-in sentence encoder, " + weights + ", " + dims + ")"
	}
	if o, ok := remoteEmbedder(rt.Embedder); ok {
		embedder = o.Model() + " at " + o.Endpoint() + " (" + dims + ")"
	}
	return chat, embedder
}
