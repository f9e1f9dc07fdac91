package retrieve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/lifecycle"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/natsauth"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/policy"
	"github.com/agentmem/agentmem/pkg/quota"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/writes"
)

// Service is the retriever: a NATS micro service answering memrpc.<tenant>.<endpoint>
// for every tenant.
type Service struct {
	cfg      Config
	deps     Deps
	logger   *zap.Logger
	handlers map[string]endpointFunc
	// policies holds the effective policy of recent sessions: a session keeps the
	// policy it started with (SPEC B5: a change of policy_overrides.json applies
	// to new sessions), and the hot path reads the overrides once per session.
	policies *lifecycle.Policies
	docs     *lru.Cache[docKey, *docFile]
	// keyLines holds the offline summariser's lines of recent messages
	// ("<tenant>/<event id>"), which session summaries digest on every request.
	keyLines *lru.Cache[string, []string]

	running  atomic.Bool
	svc      atomic.Pointer[micro.Service]
	base     context.Context // handlers' context: outlives Run's ctx until the drain is over
	inflight atomic.Int64
	received atomic.Uint64
	slots    chan struct{} // one per request being served (Config.Concurrency)
	hits     *hitPublisher // memory_hit events of context packs; Run starts it, drain stops it
	// writes applies the write events this retriever records (Service.record);
	// writeLocks keep one namespace's writes in stream order.
	writes     *writes.Applier
	writeLocks [namespaceLocks]sync.Mutex
	// metrics counts refused replies; refusedBy remembers the tenants whose
	// refused requests were logged, so that a client repeating one is logged once.
	metrics   *obs.RPCMetrics
	refusedBy *lru.Cache[string, struct{}]
}

// endpointFunc serves one endpoint: it decodes and validates data itself and
// returns the reply to marshal, or an error mapped to a micro error code. sub
// is the request's subject: its tenant, and the agent of an agent-scope write.
type endpointFunc func(ctx context.Context, sub events.Subject, data []byte) (any, error)

// New checks cfg and deps and returns a Service; Run starts it. logger names the
// worker already (app.Runtime.Component adds obs.Worker once, for every component).
func New(cfg Config, deps Deps, logger *zap.Logger) (*Service, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := deps.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	policies, err := lifecycle.NewPolicies(cfg.Policy, deps.Docs, cfg.PolicyCacheSize, logger.Named("retriever"))
	if err != nil {
		return nil, fmt.Errorf("%w: PolicyCacheSize: %w", ErrInvalidConfig, err)
	}
	docs, err := lru.New[docKey, *docFile](cfg.DocCacheSize)
	if err != nil {
		return nil, fmt.Errorf("%w: DocCacheSize: %w", ErrInvalidConfig, err)
	}
	keyLines, err := lru.New[string, []string](cfg.DigestCacheSize)
	if err != nil {
		return nil, fmt.Errorf("%w: DigestCacheSize: %w", ErrInvalidConfig, err)
	}
	metrics := deps.Metrics
	if metrics == nil {
		if metrics, err = obs.NewRPCMetrics(prometheus.NewRegistry()); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	refusedBy, err := lru.New[string, struct{}](refusedLogSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s := &Service{
		metrics:   metrics,
		refusedBy: refusedBy,
		cfg:       cfg,
		deps:      deps,
		logger:    logger.Named("retriever"),
		policies:  policies,
		docs:      docs,
		keyLines:  keyLines,
		slots:     make(chan struct{}, cfg.Concurrency),
	}
	s.hits = newHitPublisher(deps.JS, s.logger, cfg.DrainTimeout)
	if s.writes, err = writes.New(writes.Deps{
		Docs: deps.Docs, Sessions: deps.Sessions, Memories: deps.Memories, Compressor: deps.Compressor, Importer: deps.Transfer,
		Consolidator: deps.Consolidator, Policy: cfg.Policy,
	}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s.handlers = s.endpoints()
	for _, ep := range served {
		if s.handlers[ep] == nil {
			return nil, fmt.Errorf("%w: endpoint %s has no handler", ErrInvalidConfig, ep)
		}
	}
	return s, nil
}

// endpoints maps every endpoint of the contract to its handler.
func (s *Service) endpoints() map[string]endpointFunc {
	m, lim := s.deps.Memories, s.cfg.MaxTextBytes
	return map[string]endpointFunc{
		events.EndpointContext:         handle(lim, s.contextPack),
		events.EndpointSearch:          handle(lim, s.search),
		events.EndpointAppend:          handleRoute(lim, scopedWrite[events.AppendRequest](s, events.EndpointAppend)),
		events.EndpointTopic:           handle(lim, s.topic),
		events.EndpointAdd:             handleRoute(lim, scopedWrite[events.AddRequest](s, events.EndpointAdd)),
		events.EndpointGet:             handle(lim, m.Get),
		events.EndpointUpdate:          handle(lim, writeOp[events.UpdateRequest](s, events.EndpointUpdate)),
		events.EndpointDelete:          handle(lim, writeOp[events.DeleteRequest](s, events.EndpointDelete)),
		events.EndpointReset:           handle(lim, writeOp[events.ResetRequest](s, events.EndpointReset)),
		events.EndpointHistory:         handle(lim, m.History),
		events.EndpointConsolidate:     handle(lim, s.consolidate),
		events.EndpointSessionSummary:  handle(lim, s.sessionSummary),
		events.EndpointSessionClear:    handle(lim, s.sessionClear),
		events.EndpointSessionArchive:  handle(lim, s.sessionArchive),
		events.EndpointSessionRestore:  handle(lim, s.sessionRestore),
		events.EndpointItemSave:        handleRoute(lim, scopedWrite[events.ItemRequest](s, events.EndpointItemSave)),
		events.EndpointItemGet:         handle(lim, m.GetItem),
		events.EndpointItemList:        handle(lim, m.ListItems),
		events.EndpointItemUpdate:      handleRoute(lim, scopedWrite[events.ItemRequest](s, events.EndpointItemUpdate)),
		events.EndpointItemDelete:      handle(lim, writeOp[events.ItemKeyRequest](s, events.EndpointItemDelete)),
		events.EndpointItemDeleteScope: handle(lim, writeOp[events.ItemScopeRequest](s, events.EndpointItemDeleteScope)),
		events.EndpointItemSearch:      handle(lim, m.SearchItems),
		events.EndpointTenantAppend:    handleRoute(lim, scopedWrite[events.AppendRequest](s, events.EndpointTenantAppend)),
		events.EndpointTenantAdd:       handleRoute(lim, scopedWrite[events.AddRequest](s, events.EndpointTenantAdd)),
		events.EndpointTenantItemSave:  handleRoute(lim, scopedWrite[events.ItemRequest](s, events.EndpointTenantItemSave)),
		events.EndpointAgentAppend:     handleRoute(lim, scopedWrite[events.AppendRequest](s, events.EndpointAgentAppend)),
		events.EndpointAgentAdd:        handleRoute(lim, scopedWrite[events.AddRequest](s, events.EndpointAgentAdd)),
		events.EndpointAgentItemSave:   handleRoute(lim, scopedWrite[events.ItemRequest](s, events.EndpointAgentItemSave)),
		events.EndpointBackupsList:     handle(lim, s.backupsList),
		events.EndpointBackupsRestore:  handle(lim, writeOp[events.BackupRestoreRequest](s, events.EndpointBackupsRestore)),
		events.EndpointCompress:        handle(lim, s.compress),
		events.EndpointPolicyShow:      handle(lim, s.policyShow),
		events.EndpointPolicySet:       handle(lim, writeOp[events.PolicySetRequest](s, events.EndpointPolicySet)),
		events.EndpointPolicyHistory:   handle(lim, s.policyHistory),
		events.EndpointPolicyRollback:  handle(lim, writeOp[events.PolicyRollbackRequest](s, events.EndpointPolicyRollback)),
		events.EndpointEventsList:      handle(lim, s.eventsList),
		events.EndpointEventsGet:       handle(lim, s.eventGet),
		events.EndpointEventsCount:     handle(lim, s.eventsCount),
		events.EndpointExport:          handle(lim, s.export),
		events.EndpointImport:          handle(lim, s.importPage),
		events.EndpointForget:          handle(lim, s.forget),
		events.EndpointDLQList:         handle(lim, s.dlqList),
		events.EndpointDLQReplay:       handle(lim, s.dlqReplay),
	}
}

// served are the endpoints a retriever serves: those on memrpc.<tenant>.<endpoint>
// and the agent-scope writes on memrpc.<tenant>.agent.<agent_id>.<op>.
var served = slices.Concat(events.Endpoints, events.AgentScopeEndpoints)

// handle adapts a typed endpoint of the tenant (handleRoute).
func handle[Req interface{ Validate() error }, Rep any](maxTextBytes int, fn func(context.Context, string, Req) (Rep, error)) endpointFunc {
	return handleRoute(maxTextBytes, func(ctx context.Context, sub events.Subject, req Req) (Rep, error) { return fn(ctx, sub.Tenant, req) })
}

// handleRoute adapts a typed endpoint: the request is JSON-decoded and validated before fn
// sees it, so every endpoint rejects bad input the same way.
//
// A request carrying text to store or search with (events' CheckSize methods) is
// checked against maxTextBytes too, so an oversize text is a 400 naming the field,
// its size and the limit.
func handleRoute[Req interface{ Validate() error }, Rep any](maxTextBytes int, fn func(context.Context, events.Subject, Req) (Rep, error)) endpointFunc {
	return func(ctx context.Context, sub events.Subject, data []byte) (any, error) {
		var req Req
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, fmt.Errorf("%w: malformed JSON: %v", events.ErrInvalidRequest, err)
		}
		if err := req.Validate(); err != nil {
			return nil, err
		}
		if sz, ok := any(req).(sized); ok {
			if err := sz.CheckSize(maxTextBytes); err != nil {
				return nil, err
			}
		}
		return fn(ctx, sub, req)
	}
}

// sized is a request with texts bounded by Config.MaxTextBytes.
type sized interface{ CheckSize(maxTextBytes int) error }

// MicroName is the micro endpoint name of an endpoint: micro names allow no dots, so
// "session.summary" is registered as "session_summary" on subject
// memrpc.*.session.summary.
func MicroName(endpoint string) string { return strings.ReplaceAll(endpoint, ".", "_") }

// Run registers the micro service with its queue group and serves until ctx ends;
// then it stops taking requests, lets the ones already received finish (at most
// DrainTimeout) and returns nil.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("retrieve: Run called twice")
	}
	// Handlers never see shutdown as a cancellation: micro's Stop drains its
	// subscriptions asynchronously, so a request buffered in the client may still be
	// dispatched after Run returns, and it deserves a real answer. Each request is
	// bounded by its own handling, not by the service's lifetime.
	s.base = context.WithoutCancel(ctx)
	s.hits.start()
	svc, err := micro.AddService(s.deps.Conn, micro.Config{
		Name:        s.cfg.ServiceName,
		Version:     s.cfg.Version,
		Description: "agentmem retriever: context packs, memory search and CRUD on memrpc.<tenant>.<endpoint>",
		QueueGroup:  s.cfg.QueueGroup,
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			s.logger.Error("micro service error", zap.String("subject", e.Subject), zap.String("error", e.Description))
		},
	})
	if err != nil {
		s.hits.stop()
		return fmt.Errorf("retrieve: add micro service: %w", err)
	}
	for _, ep := range served {
		subject, err := events.RPCServiceSubject(ep)
		if err == nil {
			err = svc.AddEndpoint(MicroName(ep), s.serve(ep, s.handlers[ep]),
				micro.WithEndpointSubject(subject), micro.WithEndpointMetadataKey("endpoint", ep))
		}
		if err != nil {
			_ = svc.Stop()
			s.hits.stop()
			return fmt.Errorf("retrieve: add endpoint %s: %w", ep, err)
		}
	}
	s.svc.Store(&svc)
	s.logger.Info("retriever serving", zap.String("service_id", svc.Info().ID), zap.Int("endpoints", len(served)))
	<-ctx.Done()
	s.svc.Store(nil)
	if err := svc.Stop(); err != nil {
		s.logger.Warn("stopping micro service", zap.Error(err))
	}
	s.drain()
	s.logger.Info("retriever stopped")
	return nil
}

// drain waits until the requests already delivered to this replica are answered and
// the memory_hit publishes are acknowledged. micro's Stop unsubscribes and drains
// asynchronously without a completion signal, so quiescence is detected: after a
// flush (the server has processed the unsubscribes, so nothing new arrives) no
// request is in flight and none started during a second flush round trip.
func (s *Service) drain() {
	deadline := time.Now().Add(s.cfg.DrainTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		seen := s.received.Load()
		if s.inflight.Load() == 0 {
			_ = s.deps.Conn.Flush()
			if s.inflight.Load() == 0 && s.received.Load() == seen {
				break
			}
		}
		<-tick.C
	}
	if n := s.inflight.Load(); n > 0 {
		s.logger.Warn("drain timeout: requests still in flight", zap.Int64("in_flight", n))
	}
	s.hits.stop()
}

// Ready is nil while the service is registered and serving.
func (s *Service) Ready(ctx context.Context) error {
	p := s.svc.Load()
	if p == nil || (*p).Stopped() {
		return ErrNotReady
	}
	// A round trip to the server: the service's subscriptions are then registered
	// there, so a request sent right after Ready (from any connection) has a
	// responder instead of "no responders".
	ctx, cancel := context.WithTimeout(ctx, readyFlushTimeout)
	defer cancel()
	if err := s.deps.Conn.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	return nil
}

// readyFlushTimeout bounds Ready's round trip to the server.
const readyFlushTimeout = 5 * time.Second

// Info is the micro service's discovery info; ok is false when it is not serving.
func (s *Service) Info() (micro.Info, bool) {
	p := s.svc.Load()
	if p == nil {
		return micro.Info{}, false
	}
	return (*p).Info(), true
}

// serve wraps an endpoint: tenant from the subject, a recovered panic answers 500,
// errors become micro errors with a code and a message that says what is wrong.
//
// micro calls an endpoint's handler for one request after another, so each
// request is served on a goroutine of its own, at most Concurrency at once: one
// request slowed down (by ingest taking the CPU) no longer queues every other
// behind it. The slot is taken before the goroutine starts, so a replica at its
// bound stops reading requests and the others in its queue group take them.
//
// The goroutine never touches the micro.Request: micro reads the request's error
// for its stats as soon as the handler returns, so answering through it later
// would race. It answers on the reply subject through the connection instead.
func (s *Service) serve(endpoint string, fn endpointFunc) micro.Handler {
	return micro.HandlerFunc(func(mreq micro.Request) {
		if !s.replyAllowed(endpoint, mreq.Subject(), mreq.Reply()) {
			return
		}
		received := time.Now() // the wait for a slot is part of what the requester sees
		s.received.Add(1)
		s.inflight.Add(1)
		s.slots <- struct{}{}
		req := request{subject: mreq.Subject(), reply: mreq.Reply(), data: mreq.Data()}
		go func() {
			defer func() {
				<-s.slots
				s.inflight.Add(-1)
			}()
			defer s.deps.Gate.Foreground()()
			s.handle(endpoint, fn, req)
			s.metrics.Served(endpoint, time.Since(received))
		}()
	})
}

// refusedLogSize bounds the tenants remembered as already logged for a refused reply.
const refusedLogSize = 1024

// replyAllowed reports whether a request may be served: only when its reply subject
// is an inbox of the tenant its subject names (natsauth.ReplyAllowed). Otherwise
// the request is not served at all, since its answer would be published with the
// service's rights to a subject the requester chose (another tenant's forget, its
// stream, KV): it is counted, and logged once per requesting tenant, the only
// identity a request carries.
func (s *Service) replyAllowed(endpoint, subject, reply string) bool {
	tenant := ""
	if sub, err := events.ParseSubject(subject); err == nil {
		tenant = sub.Tenant
	}
	if natsauth.ReplyAllowed(tenant, reply) {
		return true
	}
	s.metrics.RefusedReply(endpoint)
	if seen, _ := s.refusedBy.ContainsOrAdd(tenant, struct{}{}); !seen {
		s.logger.Warn("refused a request whose reply subject is outside the requester's inbox; further ones of this tenant are only counted (agentmem_rpc_refused_replies_total)",
			zap.String("tenant", tenant), zap.String("subject", subject), zap.String("reply", reply))
	}
	return false
}

// request is what an answer needs of a micro request, copied before the handler
// returns.
type request struct {
	subject, reply string
	data           []byte
}

// respond publishes an answer (a reply, or an error in micro's headers) to the
// requester.
func (s *Service) respond(req request, data []byte, header nats.Header) error {
	return s.deps.Conn.PublishMsg(&nats.Msg{Subject: req.reply, Data: data, Header: header})
}

func (s *Service) handle(endpoint string, fn endpointFunc, req request) {
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("panic serving request", zap.String("endpoint", endpoint), zap.Any("panic", r), zap.Stack("stack"))
			s.respondError(req, endpoint, fmt.Errorf("internal error serving %s", endpoint))
		}
	}()
	sub, err := events.ParseSubject(req.subject)
	if err == nil && (sub.Kind != events.SubjectRPC || sub.Endpoint != endpoint) {
		err = fmt.Errorf("%w: subject %q is not a %s request", events.ErrInvalidSubject, req.subject, endpoint)
	}
	if err == nil {
		err = reservedUser(endpoint, req.data)
	}
	if err != nil {
		s.respondError(req, endpoint, fmt.Errorf("%w: %w", events.ErrInvalidRequest, err))
		return
	}
	reply, err := fn(s.base, sub, req.data)
	if err != nil {
		s.respondError(req, endpoint, err)
		return
	}
	buf := replyBuffers.Get().(*bytes.Buffer)
	defer putReplyBuffer(buf)
	// A reply over the connection's max_payload would not be sent at all: the
	// requester would wait for its timeout. fit cuts it, or it becomes a 413.
	if err := fit(buf, endpoint, reply, int(s.deps.Conn.MaxPayload())); err != nil {
		s.respondError(req, endpoint, err)
		return
	}
	if err := s.respond(req, buf.Bytes(), nil); err != nil {
		s.logger.Warn("respond", zap.String("endpoint", endpoint), zap.Error(err))
		s.respondError(req, endpoint, fmt.Errorf("respond to %s: %w", endpoint, err))
	}
}

// replyBuffers recycles the buffers replies are encoded into (a context pack is
// tens of kilobytes): PublishMsg copies the bytes into the connection's write
// buffer, so a buffer is free again once it returns.
var replyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledReply bounds the buffers kept for reuse, so that one huge reply does
// not stay allocated for good.
const maxPooledReply = 1 << 20

func putReplyBuffer(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledReply {
		return
	}
	buf.Reset()
	replyBuffers.Put(buf)
}

func (s *Service) respondError(req request, endpoint string, err error) {
	code := ErrorCode(err)
	if code == events.RPCCodeInternal || code == events.RPCCodeUnavailable {
		s.logger.Error("request failed", zap.String("endpoint", endpoint), zap.String("subject", req.subject), zap.Error(err))
	}
	// A header value cannot hold line breaks (errors.Join separates with "\n").
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	header := nats.Header{micro.ErrorHeader: []string{msg}, micro.ErrorCodeHeader: []string{code}}
	if rerr := s.respond(req, nil, header); rerr != nil {
		s.logger.Warn("respond with error", zap.String("endpoint", endpoint), zap.Error(rerr))
	}
}

// ErrorCode maps an error to the micro error code of events/rpc.go: bad input 400,
// a tenant over a quota 429, a missing record 404, a dependency that is not there or not answering 503, the
// rest 500.
func ErrorCode(err error) string {
	switch {
	case errors.Is(err, events.ErrInvalidRequest), errors.Is(err, events.ErrInvalidID),
		errors.Is(err, events.ErrInvalidRecord), errors.Is(err, events.ErrInvalidEvent),
		errors.Is(err, vectorstore.ErrInvalidFilter), errors.Is(err, vectorstore.ErrInvalidQuery),
		errors.Is(err, vectorstore.ErrInvalidRecord), errors.Is(err, vectorstore.ErrConflict),
		errors.Is(err, docstore.ErrInvalidContent), errors.Is(err, docstore.ErrInvalidPath),
		errors.Is(err, memory.ErrInvalid), errors.Is(err, policy.ErrInvalid), errors.Is(err, policy.ErrInvalidOverrides),
		errors.Is(err, eventstore.ErrInvalidQuery), errors.Is(err, writes.ErrInvalid):
		return events.RPCCodeBadRequest
	case errors.Is(err, ErrReplyTooLarge):
		return events.RPCCodeTooLarge
	case errors.Is(err, quota.ErrExceeded):
		return events.RPCCodeQuota
	case errors.Is(err, ErrNotFound), errors.Is(err, vectorstore.ErrNotFound), errors.Is(err, memory.ErrNotFound),
		errors.Is(err, session.ErrNotFound), errors.Is(err, eventstore.ErrNotFound), errors.Is(err, docstore.ErrNotFound),
		errors.Is(err, writes.ErrNotFound):
		return events.RPCCodeNotFound
	case errors.Is(err, ErrUnavailable), errors.Is(err, writes.ErrUnavailable), errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, vectorstore.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		return events.RPCCodeUnavailable
	default:
		return events.RPCCodeInternal
	}
}
