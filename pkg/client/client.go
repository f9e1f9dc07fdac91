package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/agentmem/agentmem/events"
)

// DefaultRequestTimeout bounds one publish acknowledgement or one request when the
// caller's context has no earlier deadline.
const DefaultRequestTimeout = 10 * time.Second

// Sentinel errors. Every error of this package wraps one of them (or is an *Error,
// which matches ErrBadRequest, ErrNotFound, ErrInternal or ErrUnavailable by code).
var (
	// ErrInvalidConfig: New was given a Config that cannot work; the message names the field.
	ErrInvalidConfig = errors.New("client: invalid config")
	// ErrInvalidEvent: an event method was given input the contract rejects; nothing
	// was published. It also wraps events.ErrInvalidEvent.
	ErrInvalidEvent = errors.New("client: invalid event")
	// ErrPublish: JetStream did not acknowledge an event.
	ErrPublish = errors.New("client: publish")
	// ErrNoStream: no JetStream stream captures mem.>, so the event could not be stored.
	ErrNoStream = errors.New("client: no event stream")
	// ErrNoRetriever: nothing is subscribed to the request subject.
	ErrNoRetriever = errors.New("client: no retriever is answering")
	// ErrConnect: Connect could not connect (unreachable server, refused credential).
	ErrConnect = errors.New("client: connect")
	// ErrRequest: a request failed in transport (timeout, closed connection).
	ErrRequest = errors.New("client: request")
	// ErrBadReply: the retriever answered with something that is not the reply type.
	ErrBadReply = errors.New("client: bad reply")
	// ErrRefused: the NATS server refused a request or an event by the
	// credential's permissions (an agent's credential requesting an admin
	// endpoint); the call fails as soon as the server says so, not at its
	// timeout, with an error that also wraps ErrRequest or ErrPublish.
	ErrRefused = errors.New("client: refused by the credential's permissions")

	// Matched by *Error through its code (errors.Is(err, client.ErrNotFound)).
	ErrBadRequest  = errors.New("client: bad request")
	ErrNotFound    = errors.New("client: not found")
	ErrInternal    = errors.New("client: retriever internal error")
	ErrUnavailable = errors.New("client: retriever dependency unavailable")
	// ErrQuota: the write would take the tenant over a quota (429); the
	// message names the quota's configuration key.
	ErrQuota = errors.New("client: tenant over quota")
)

// Error is a failed request as the retriever reported it in the NATS micro error
// headers (Nats-Service-Error-Code, Nats-Service-Error). Code is one of the
// events.RPCCode* values; Message names the field and the rule that failed.
type Error struct {
	Endpoint string
	Code     string
	Message  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("agentmem %s: %s %s", e.Endpoint, e.Code, e.Message)
}

// Is lets errors.Is match an *Error against the sentinel of its code.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case events.RPCCodeBadRequest:
		return target == ErrBadRequest
	case events.RPCCodeNotFound:
		return target == ErrNotFound
	case events.RPCCodeInternal:
		return target == ErrInternal
	case events.RPCCodeUnavailable:
		return target == ErrUnavailable
	case events.RPCCodeQuota:
		return target == ErrQuota
	}
	return false
}

// Config configures a Client. A client speaks for one tenant; the user and session
// are arguments of each call, so one client serves every user of an agent.
type Config struct {
	// Tenant is the <tenant> token of every subject; required.
	Tenant string
	// AgentID is put on every event and on context requests that name no agent;
	// optional.
	AgentID string
	// RequestTimeout bounds each publish acknowledgement and each request;
	// default DefaultRequestTimeout. A context deadline that comes earlier wins.
	RequestTimeout time.Duration
	// MaxTextBytes is the deployment's limit on each text of an event
	// (limits.max_text_bytes, events.Envelope.CheckSize): an event over it is
	// refused before publishing, with ErrInvalidEvent and events.ErrTooLarge.
	// Default events.DefaultMaxTextBytes.
	MaxTextBytes int
	// KeepSecrets publishes observations as given. By default Publish first
	// replaces the credentials in an observation's text, tool arguments and
	// tool output by markers (pkg/redact): the event stream keeps every event
	// for its max_age, and a secret redacted only downstream would stay in it,
	// readable by whoever can read the stream. Set it when the stream itself
	// must hold the exact text (and is protected as such).
	KeepSecrets bool
}

func (c Config) withDefaults() Config {
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxTextBytes == 0 {
		c.MaxTextBytes = events.DefaultMaxTextBytes
	}
	return c
}

// Validate reports what is wrong with c after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := events.ValidateID("Tenant", c.Tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.AgentID != "" {
		if err := events.ValidateID("AgentID", c.AgentID); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if c.RequestTimeout < 0 {
		return fmt.Errorf("%w: RequestTimeout is %s; it must not be negative", ErrInvalidConfig, c.RequestTimeout)
	}
	if c.MaxTextBytes < 0 {
		return fmt.Errorf("%w: MaxTextBytes is %d; it must not be negative", ErrInvalidConfig, c.MaxTextBytes)
	}
	return nil
}

// Client publishes an agent's events and asks the retriever. It is safe for
// concurrent use and does not own the connection: closing it is the caller's job.
type Client struct {
	cfg      Config
	nc       *nats.Conn
	js       jetstream.JetStream
	refusals *refusals
}

// New returns a client on nc for cfg.Tenant.
func New(nc *nats.Conn, cfg Config) (*Client, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: the *nats.Conn is nil", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("%w: jetstream context: %w", ErrInvalidConfig, err)
	}
	return &Client{cfg: cfg, nc: nc, js: js, refusals: refusalsOf(nc)}, nil
}

// Tenant is the tenant the client speaks for.
func (c *Client) Tenant() string { return c.cfg.Tenant }

// withTimeout bounds ctx by RequestTimeout; an earlier deadline of ctx stays.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.RequestTimeout)
}

// request sends req to memrpc.<tenant>.<endpoint> and decodes the reply into Rep.
func request[Rep any](ctx context.Context, c *Client, endpoint string, req any) (Rep, error) {
	var rep Rep
	data, err := c.roundTrip(ctx, endpoint, req)
	if err != nil {
		return rep, err
	}
	if len(data) == 0 {
		return rep, fmt.Errorf("%w: memrpc.%s.%s: empty reply", ErrBadReply, c.cfg.Tenant, endpoint)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return rep, fmt.Errorf("%w: memrpc.%s.%s: %w", ErrBadReply, c.cfg.Tenant, endpoint, err)
	}
	return rep, nil
}

// roundTrip sends req to memrpc.<tenant>.<endpoint> (an agent-scope write to
// memrpc.<tenant>.agent.<agent_id>.<op>, the agent its request names) and
// returns the reply body.
// Requests are not validated here: the retriever is the authority on the contract,
// so a client never rejects what a newer retriever accepts, and its answer to bad
// input is an *Error with code 400 naming the field.
func (c *Client) roundTrip(ctx context.Context, endpoint string, req any) ([]byte, error) {
	agentID := ""
	if w, ok := req.(events.Scoped); ok {
		_, _, agentID = w.Target()
	}
	subject, err := events.RequestSubject(c.cfg.Tenant, agentID, endpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRequest, err)
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: encode request: %w", ErrRequest, subject, err)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	ctx, stop := c.refusals.watch(ctx, subject)
	defer stop()
	msg, err := c.nc.RequestWithContext(ctx, subject, data)
	if refusal := refusedCause(ctx); refusal != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRequest, subject, refusal)
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("%w on %s (is the retriever running? `agentmem up` or cmd/retriever serves it): %w", ErrNoRetriever, subject, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %w", ErrRequest, subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, &Error{Endpoint: endpoint, Code: code, Message: msg.Header.Get(micro.ErrorHeader)}
	}
	return msg.Data, nil
}
