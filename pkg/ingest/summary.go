package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/session"
)

// announceSummaries publishes summary_due for each session of the batch that
// passed a threshold with it, once per crossing: the event id derives from the
// session and the crossing, so a republish is dropped by the stream's duplicate
// window and a late one changes nothing (the extractor's summary is
// idempotent). A batch that only redelivers a session's events announces its
// current crossing again, since the first delivery may have failed before its
// publish. Ingest waits for the publish acks, never for the summary.
func (w *Worker) announceSummaries(ctx context.Context, envs []events.Envelope, states map[sessionOf]session.State, applied map[sessionOf]appliedShare, errs []error) {
	if w.summary.MessageThreshold == 0 {
		return
	}
	owners := map[sessionOf][]int{}
	for i, env := range envs {
		if errs[i] == nil {
			k := sessionOf{env.Tenant, env.UserID, env.SessionID}
			owners[k] = append(owners[k], i)
		}
	}
	type pending struct {
		f   jetstream.PubAckFuture
		idx []int
		id  string
	}
	var futures []pending
	for k, idx := range owners {
		st, ok := states[k]
		if !ok {
			continue
		}
		share := applied[k]
		trigger := w.triggerOf(ctx, k)
		again := share.events == 0 // a redelivery: its first delivery may have failed before publishing
		var ids []string
		if c := trigger.MessageCrossing(st.Messages); c > 0 && (again || c > trigger.MessageCrossing(st.Messages-share.messages)) {
			ids = append(ids, summaryDueID(k, "m", c))
		}
		if c := trigger.TokenCrossing(st.Tokens); c > 0 && (again || c > trigger.TokenCrossing(st.Tokens-share.tokens)) {
			ids = append(ids, summaryDueID(k, "t", c))
		}
		for _, id := range ids {
			env := events.New(events.TypeSummaryDue, k.tenant, k.userID, st.AgentID, k.sessionID)
			env.ID = id
			env.SummaryDue = &events.SummaryDue{Messages: max(1, st.Messages), Tokens: st.Tokens}
			msg, err := eventstore.Msg(env)
			if err == nil {
				var f jetstream.PubAckFuture
				if f, err = w.deps.JS.PublishMsgAsync(msg); err == nil {
					futures = append(futures, pending{f, idx, id})
					continue
				}
			}
			for _, i := range idx {
				errs[i] = fmt.Errorf("ingest: publish summary_due %s: %w", id, err)
			}
		}
	}
	for _, p := range futures {
		var err error
		select {
		case <-p.f.Ok():
			w.logger.Debug("summary due", zap.String("event_id", p.id), obs.Session(envs[p.idx[0]].SessionID))
			continue
		case err = <-p.f.Err():
		case <-ctx.Done():
			err = ctx.Err()
		}
		for _, i := range p.idx {
			errs[i] = fmt.Errorf("ingest: publish summary_due %s: %w", p.id, err)
		}
	}
}

// triggerOf is the summary trigger of a session: Config.Summary, with the
// session's policy's thresholds when Deps.Policy is set. A policy whose keep
// count is not below its threshold (policy.Validate refuses it) keeps the
// configured trigger.
func (w *Worker) triggerOf(ctx context.Context, k sessionOf) session.SummaryTrigger {
	t := w.summary
	if w.deps.Policy == nil {
		return t
	}
	p := w.deps.Policy(ctx, k.tenant, k.userID, k.sessionID)
	next := t
	next.MessageThreshold, next.TokenPercent, next.KeepCount = p.SessionSummaryMessageThreshold, p.SessionSummaryTokenPercent, p.SessionSummaryKeepCount
	if next.Validate() != nil || next.MessageThreshold == 0 {
		return t
	}
	return next
}

// appliedShare is what of a batch was new to a session's state.
type appliedShare struct{ events, messages, tokens int }

func (a *appliedShare) add(env events.Envelope) {
	a.events++
	if o := env.Observation; o != nil && o.EffectiveKind() == events.KindMessage {
		a.messages++
		a.tokens += session.EstimateTokens(o.Text)
	}
}

// summaryDueID is the deterministic id of a session's crossing: kind "m" for
// the message threshold, "t" for the token share.
func summaryDueID(k sessionOf, kind string, crossing int) string {
	sum := sha256.Sum256([]byte(k.tenant + "\x00" + k.userID + "\x00" + k.sessionID))
	return "summary-" + hex.EncodeToString(sum[:12]) + "-" + kind + strconv.Itoa(crossing)
}
