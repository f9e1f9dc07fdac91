package llm

import "context"

// Outcomes of one attempt, as an Observer is told them.
const (
	OutcomeOK          = "ok"          // answered with a usable reply
	OutcomeBadReply    = "bad_reply"   // answered, but not with JSON of the schema
	OutcomeUnavailable = "unavailable" // network error, timeout, 429 or 5xx: retried
	OutcomeRejected    = "rejected"    // any other 4xx: not retried
	OutcomeCanceled    = "canceled"    // the caller's context ended first
	// OutcomeFallback is not an attempt: the step used its offline twin in
	// place of the model's answer (ObserveFallback).
	OutcomeFallback = "fallback"
)

// StepUnknown is the step of a call whose context names none.
const StepUnknown = "unknown"

// Observer is told about every attempt a Client makes: the step that made it
// (WithStep), its outcome (one of the Outcome values) and the tokens the endpoint
// reported for it (zero when it did not answer). It must be safe for concurrent use
// and cheap: it runs on the caller's goroutine. pkg/obs.LLMMetrics implements it.
type Observer interface {
	ObserveLLMCall(step, outcome string, promptTokens, completionTokens int)
}

type stepKey struct{}

// WithStep names the agentmem step (decide, extract, semantic, ...) that the calls
// made with ctx belong to, for an Observer. step must come from a small fixed set:
// it becomes a metric label.
func WithStep(ctx context.Context, step string) context.Context {
	return context.WithValue(ctx, stepKey{}, step)
}

// StepOf returns the step WithStep put in ctx, or StepUnknown.
func StepOf(ctx context.Context) string {
	if s, ok := ctx.Value(stepKey{}).(string); ok && s != "" {
		return s
	}
	return StepUnknown
}
