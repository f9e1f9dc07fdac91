package retrieve

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
)

// A tenant's dead letters (SPEC E7) for its admin credential: the retriever reads
// and replays them with the service's JetStream rights, only ever those whose
// original subject is an event of the requesting tenant.

// dlqList answers dlq.list.
func (s *Service) dlqList(ctx context.Context, tenant string, req events.DLQListRequest) (events.DLQListReply, error) {
	limit := req.Limit
	if limit == 0 {
		limit = events.MaxLimit
	}
	dls, err := s.tenantDeadLetters(ctx, tenant, req.Reason, limit)
	rep := events.DLQListReply{DeadLetters: make([]events.DeadLetter, 0, len(dls))}
	for _, dl := range dls {
		rep.DeadLetters = append(rep.DeadLetters, events.DeadLetter{
			Seq: dl.Seq, Worker: dl.Worker, Subject: dl.Subject, Reason: dl.Reason, Class: dl.Class,
			Deliveries: dl.Deliveries, StoredTS: dl.Time.UTC(), Data: dl.Data,
		})
	}
	return rep, err
}

// dlqReplay answers dlq.replay. Dead letters named by sequence are all checked
// before any is replayed, so that a wrong sequence replays nothing; one of
// another tenant is not found, as if it did not exist.
func (s *Service) dlqReplay(ctx context.Context, tenant string, req events.DLQReplayRequest) (events.DLQReplayReply, error) {
	var chosen []bus.DeadLetter
	rep := events.DLQReplayReply{}
	if len(req.Seqs) > 0 {
		for _, seq := range req.Seqs {
			dl, err := bus.GetDeadLetter(ctx, s.deps.JS, s.cfg.DLQStream, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) || (err == nil && dl.Tenant() != tenant) {
				return rep, fmt.Errorf("%w: tenant %s has no dead letter with sequence %d", ErrNotFound, tenant, seq)
			}
			if err != nil {
				return rep, err
			}
			chosen = append(chosen, dl)
		}
	} else {
		dls, err := s.tenantDeadLetters(ctx, tenant, req.Reason, events.MaxLimit+1)
		if err != nil {
			return rep, err
		}
		rep.More = len(dls) > events.MaxLimit
		chosen = dls[:min(len(dls), events.MaxLimit)]
	}
	rep.Replayed = make([]events.DLQReplayed, 0, len(chosen))
	for _, dl := range chosen {
		if err := bus.ReplayDeadLetter(ctx, s.deps.JS, dl); err != nil {
			return rep, fmt.Errorf("after %d replayed: %w", len(rep.Replayed), err)
		}
		rep.Replayed = append(rep.Replayed, events.DLQReplayed{Seq: dl.Seq, Subject: dl.Subject})
	}
	return rep, nil
}

// tenantDeadLetters lists up to limit dead letters of tenant of reason class
// ("" for all), oldest first; none when the dead-letter stream does not exist.
func (s *Service) tenantDeadLetters(ctx context.Context, tenant, class string, limit int) ([]bus.DeadLetter, error) {
	dls, err := bus.ListDeadLettersOf(ctx, s.deps.JS, s.cfg.DLQStream, limit, func(dl bus.DeadLetter) bool {
		return dl.Tenant() == tenant && (class == "" || dl.Class == class)
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	return dls, err
}

// dlqCut keeps the first dead letters (stream order).
type dlqCut events.DLQListReply

func (r dlqCut) units() int { return len(r.DeadLetters) }

func (r dlqCut) keep(n int) any {
	return events.DLQListReply{DeadLetters: r.DeadLetters[:n], Truncated: true}
}
