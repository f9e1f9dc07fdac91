package processor

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/records"
)

// FallbackDecider is the write decision with the model first and, when the
// model stays unavailable after its retries (llm.ErrUnavailable), the rule-based
// decision in its place (issue 22: degrade, don't fail). The rules' answer is
// safe: they keep explicit remember requests and personal statements. A
// decision they made stands in metadata records.MetaProcessedBy =
// records.ProcessedByRulesFallback, so that a later pass can find it and ask
// the model. Any other error (a refused request, the context ending) is returned.
type FallbackDecider struct {
	model  WriteDecider
	rules  WriteDecider
	logger *zap.Logger
}

// NewFallbackDecider wraps model with the rule-based decider. A nil logger logs
// nothing.
func NewFallbackDecider(model WriteDecider, logger *zap.Logger) *FallbackDecider {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &FallbackDecider{model: model, rules: NewRuleDecider(), logger: logger}
}

// Decide implements WriteDecider.
func (d *FallbackDecider) Decide(ctx context.Context, obs records.Observation) (records.Episode, error) {
	ep, err := d.model.Decide(ctx, obs)
	if err == nil || !errors.Is(err, llm.ErrUnavailable) || ctx.Err() != nil {
		return ep, err
	}
	return d.fallback(ctx, obs, err)
}

// DecideBatch implements BatchDecider: with a model that decides in batches, the
// whole batch falls back when it is unavailable; otherwise each observation is
// decided alone.
func (d *FallbackDecider) DecideBatch(ctx context.Context, obs []records.Observation) ([]records.Episode, error) {
	batcher, ok := d.model.(BatchDecider)
	if !ok {
		out := make([]records.Episode, len(obs))
		for i, o := range obs {
			var err error
			if out[i], err = d.Decide(ctx, o); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	eps, err := batcher.DecideBatch(ctx, obs)
	if err == nil || !errors.Is(err, llm.ErrUnavailable) || ctx.Err() != nil {
		return eps, err
	}
	out := make([]records.Episode, len(obs))
	for i, o := range obs {
		var ferr error
		if out[i], ferr = d.fallback(ctx, o, err); ferr != nil {
			return nil, ferr
		}
	}
	return out, nil
}

// fallback is the rule-based decision of obs in place of the model's, which
// failed with cause.
func (d *FallbackDecider) fallback(ctx context.Context, obs records.Observation, cause error) (records.Episode, error) {
	ep, rerr := d.rules.Decide(ctx, obs)
	if rerr != nil {
		return records.Episode{}, errors.Join(cause, rerr)
	}
	ep.ProcessedBy = records.ProcessedByRulesFallback
	d.logger.Warn("model unavailable; the rule-based write decision stands in",
		zap.String("processed_by", ep.ProcessedBy), zap.Bool("write", ep.Write), zap.String("chat_id", obs.ChatID), zap.Error(cause))
	return ep, nil
}
