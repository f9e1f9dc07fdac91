package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/llm/llmtest"
)

// Defaults of the remote-model phase: an embedder answering in 50 ms and a chat
// model in 300 ms, as a hosted endpoint does.
const (
	DefaultRemoteEmbedLatency = 50 * time.Millisecond
	DefaultRemoteChatLatency  = 300 * time.Millisecond
	// DefaultRemoteObservations is about 10 s of ingest at the target of 300
	// observations/s: long enough for ingest to reach its steady rate (a batch
	// takes a model round trip), short enough for the default run.
	DefaultRemoteObservations = 4000
)

// TargetLLMIngestObsPerS is the remote phase's ingest target: with a 300 ms
// model deciding, one ingest replica still takes 300 observations/s.
const TargetLLMIngestObsPerS = 300.0

// remote is the remote-model phase: a second stack, configured with an
// OpenAI-compatible chat model and embedder (llmtest.Model, in this process,
// answering after RemoteChatLatency and RemoteEmbedLatency), measured as the
// first: context requests against the asked user's memories (as many as the
// first stack's asked user holds, embedded remotely), ingest with the model's
// write decider, extraction with the model's extractor. The first stack is
// closed before: the phase adds nothing to its peak RSS.
func remote(ctx context.Context, cfg Config, logger *zap.Logger, res *Result) error {
	if cfg.SkipRemote {
		return nil
	}
	model := llmtest.StartModel()
	defer model.Close()
	model.SetLatency(cfg.RemoteChatLatency, cfg.RemoteEmbedLatency)
	sub := cfg
	sub.DataDir = filepath.Join(cfg.DataDir, "remote")
	sub.Users = 1
	sub.Memories = max(1, cfg.Memories/cfg.Users)
	sub.IngestMessages = cfg.RemoteObservations
	sub.Curve = false
	fmt.Fprintf(cfg.Progress, "== remote models: chat completions in %s, embeddings in %s (OpenAI-compatible server in this process)\n", cfg.RemoteChatLatency, cfg.RemoteEmbedLatency)
	b, err := newBencher(ctx, sub, logger, map[string]string{
		"llm.base_url": model.URL(), "llm.model": "bench-chat",
		"embed.provider": "openai", "embed.base_url": model.URL(), "embed.model": "bench-embedding",
	})
	if err != nil {
		return err
	}
	defer b.close()
	var r Result
	for _, phase := range []struct {
		name string
		run  func(context.Context, *Result) error
	}{{"remote-load", b.load}, {"remote-latency", b.latency}, {"remote-ingest", b.ingest}, {"remote-extraction", b.extraction}} {
		if err := profiled(cfg.ProfileDir, phase.name, func() error { return phase.run(ctx, &r) }); err != nil {
			return err
		}
		if err := b.idle(ctx); err != nil {
			return err
		}
	}
	res.RemoteModelLatencyMs = float64(cfg.RemoteEmbedLatency.Microseconds()) / 1e3
	res.RemoteChatLatencyMs = float64(cfg.RemoteChatLatency.Microseconds()) / 1e3
	res.RemoteMemories = r.Memories
	res.RemoteNATSRRP99us = r.NATSRRP99us
	res.RemoteCtxP50us, res.RemoteCtxP99us = r.CtxP50us, r.CtxP99us
	res.RemoteCtxP99OverModelUs = r.CtxP99us - res.RemoteModelLatencyMs*1e3
	res.RemoteCtxNewQueries, res.RemoteCtxNewQueryP50us, res.RemoteCtxNewQueryP99us = r.CtxNewQueries, r.CtxNewQueryP50us, r.CtxNewQueryP99us
	res.RemoteCtxNewQueryP50OverModelUs = r.CtxNewQueryP50us - res.RemoteModelLatencyMs*1e3
	res.RemoteObservations = sub.IngestMessages
	res.LLMIngestObsPerS = r.IngestMsgsPerS
	res.RemoteModelCallsPerObservation = r.ModelCallsPerObservation
	res.RemoteExtractSessPerS = r.ExtractSessPerS
	res.RemoteModelCallsPerSession = r.ModelCallsPerSession
	res.RemoteEmbedRequests = model.Calls(llmtest.StepEmbed)
	return nil
}
