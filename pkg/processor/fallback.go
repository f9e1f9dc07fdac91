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
	ep, rerr := d.rules.Decide(ctx, obs)
	if rerr != nil {
		return records.Episode{}, errors.Join(err, rerr)
	}
	ep.ProcessedBy = records.ProcessedByRulesFallback
	d.logger.Warn("model unavailable; the rule-based write decision stands in",
		zap.String("processed_by", ep.ProcessedBy), zap.Bool("write", ep.Write), zap.String("chat_id", obs.ChatID), zap.Error(err))
	return ep, nil
}
