package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentmem/agentmem/pkg/breaker"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/obs"
)

// Names of the model endpoints: their ready checks and metric labels.
const (
	EndpointLLM      = "llm"
	EndpointEmbedder = "embedder"
)

// newBreaker returns the circuit breaker of one model endpoint, reporting to the
// endpoint metrics, and adds it to rt.Breakers.
func (rt *Runtime) newBreaker(name, endpoint string, classify func(error) breaker.Class) (*breaker.Breaker, error) {
	m, err := obs.NewEndpointMetrics(rt.Registry)
	if err != nil {
		return nil, err
	}
	m.Watch(name)
	b, err := breaker.New(breaker.Config{
		Name:     name,
		Endpoint: endpoint,
		Classify: classify,
		OnChange: func(s breaker.State) {
			m.Available(name, s == breaker.StateClosed)
			if s == breaker.StateMisconfigured {
				m.ConfigError(name)
			}
		},
	}, rt.Logger)
	if err != nil {
		return nil, err
	}
	rt.Breakers = append(rt.Breakers, b)
	return b, nil
}

// gate is what the stream workers wait for before pulling: every model endpoint
// of the process is callable. nil without any.
func (rt *Runtime) gate() bus.Gate {
	if len(rt.Breakers) == 0 {
		return nil
	}
	return rt.Breakers
}

// configStatus reports the HTTP statuses that mean the endpoint refuses the
// configuration rather than one request: the key (401, 403) or the model or
// path (404).
func configStatus(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound
}

// classifyLLM tells what a chat call's error says about the endpoint.
func classifyLLM(err error) breaker.Class {
	var ee *llm.EndpointError
	switch {
	case errors.Is(err, llm.ErrUnavailable):
		return breaker.ClassTransient
	case errors.Is(err, llm.ErrRequest) && errors.As(err, &ee) && configStatus(ee.Status):
		return breaker.ClassConfig
	}
	return breaker.ClassSuccess // a bad reply or a rejected request: the endpoint answered
}

// classifyEmbed tells what an embeddings call's error says about the endpoint.
func classifyEmbed(err error) breaker.Class {
	switch {
	case errors.Is(err, embed.ErrUnavailable):
		return breaker.ClassTransient
	case errors.Is(err, embed.ErrRejected) && configStatus(embed.HTTPStatus(err)):
		return breaker.ClassConfig
	}
	return breaker.ClassSuccess
}

// guardedEmbedder calls an embedding endpoint through its circuit breaker.
type guardedEmbedder struct {
	embed.Embedder
	b *breaker.Breaker
}

// remoteEmbedder is the OpenAI-compatible client behind e, breaker or not.
func remoteEmbedder(e embed.Embedder) (*embed.OpenAI, bool) {
	if g, ok := e.(guardedEmbedder); ok {
		e = g.Embedder
	}
	o, ok := e.(*embed.OpenAI)
	return o, ok
}

func (g guardedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	var vecs [][]float32
	called := false
	err := g.b.Do(ctx, func(ctx context.Context) (err error) {
		called = true
		vecs, err = g.Embedder.Embed(ctx, texts)
		return err
	})
	if err != nil && !called && !errors.Is(err, embed.ErrRejected) {
		// Refused without a call (circuit open): still ErrUnavailable to callers.
		return nil, fmt.Errorf("%w: %w", embed.ErrUnavailable, err)
	}
	return vecs, err
}
