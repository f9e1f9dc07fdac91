package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Conn is the connection to publish on; one per Publisher. Required.
	Conn *nats.Conn
	// OwnConn makes Close close Conn (after draining it). By default the caller
	// keeps ownership: watermill-nats closes connections it was handed, which
	// surprises a caller sharing one.
	OwnConn bool
	// PublishTimeout bounds the wait for each PubAck; default 5s.
	PublishTimeout time.Duration
}

func (c PublisherConfig) withDefaults() PublisherConfig {
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 5 * time.Second
	}
	return c
}

// Validate reports configuration errors.
func (c PublisherConfig) Validate() error {
	if c.Conn == nil {
		return fmt.Errorf("%w: publisher: Conn is nil", ErrInvalidConfig)
	}
	if c.PublishTimeout < 0 {
		return fmt.Errorf("%w: publisher: PublishTimeout %s is negative", ErrInvalidConfig, c.PublishTimeout)
	}
	return nil
}

// Publisher is a Watermill message.Publisher over JetStream. The topic is the NATS
// subject, the payload the data and the metadata the headers; the message UUID is
// sent as Nats-Msg-Id (unless the metadata already carries one) so that JetStream
// drops a duplicate publish within the stream's duplicate window. Publish returns
// only after JetStream acknowledged every message.
type Publisher struct {
	cfg    PublisherConfig
	js     jetstream.JetStream
	logger *zap.Logger

	mu     sync.RWMutex
	closed bool
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher on cfg.Conn.
func NewPublisher(cfg PublisherConfig, logger *zap.Logger) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("%w: publisher: %w", ErrInvalidConfig, err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Publisher{cfg: cfg.withDefaults(), js: js, logger: logger}, nil
}

// Publish publishes msgs to the subject topic, one after the other, and stops at
// the first one JetStream does not acknowledge.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return fmt.Errorf("%w: publish to %s", ErrClosed, topic)
	}
	if err := validatePublishSubject(topic); err != nil {
		return err
	}
	for _, msg := range msgs {
		if err := p.publish(topic, msg); err != nil {
			return err
		}
	}
	return nil
}

func (p *Publisher) publish(subject string, msg *message.Message) error {
	nm, err := toNATS(subject, msg)
	if err != nil {
		return err
	}
	// The message context is not used for cancellation: the Router's Timeout middleware
	// leaves an expired context on the message that PoisonQueue then dead-letters.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(msg.Context()), p.cfg.PublishTimeout)
	defer cancel()
	ack, err := p.js.PublishMsg(ctx, nm)
	if err != nil {
		return fmt.Errorf("%w: message %s to %s: %w", ErrPublish, msg.UUID, subject, err)
	}
	if ack.Duplicate {
		p.logger.Debug("duplicate publish dropped by JetStream",
			zap.String("subject", subject), zap.String("msg_id", nm.Header.Get(jetstream.MsgIDHeader)), zap.Uint64("stream_seq", ack.Sequence))
	}
	return nil
}

// Close stops the Publisher; it closes the connection only when it owns it.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.cfg.OwnConn {
		return drainConn(p.cfg.Conn)
	}
	return nil
}

// toNATS turns a Watermill message into a NATS message on subject.
func toNATS(subject string, msg *message.Message) (*nats.Msg, error) {
	nm := nats.NewMsg(subject)
	nm.Data = msg.Payload
	for k, v := range msg.Metadata {
		if k == "" || strings.ContainsAny(k, ": \t\r\n") {
			return nil, fmt.Errorf("%w: message %s: metadata key %q cannot be a NATS header name", ErrPublish, msg.UUID, k)
		}
		// A line break would end the header block early (a panic's stack trace does
		// land here as the PoisonQueue reason).
		nm.Header.Set(k, headerValueReplacer.Replace(v))
	}
	if nm.Header.Get(jetstream.MsgIDHeader) == "" && msg.UUID != "" {
		nm.Header.Set(jetstream.MsgIDHeader, msg.UUID)
	}
	return nm, nil
}

var headerValueReplacer = strings.NewReplacer("\r\n", " | ", "\n", " | ", "\r", " ")

// validatePublishSubject rejects what cannot be a published subject.
func validatePublishSubject(s string) error {
	if s == "" || strings.ContainsAny(s, "*> \t\r\n") || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return fmt.Errorf("%w: topic %q is not a concrete NATS subject", ErrPublish, s)
	}
	return nil
}

// drainConn drains nc and waits until it is closed, so that pending acks and
// publishes reach the server before Close returns (bounded by the connection's
// drain timeout, 30s by default).
func drainConn(nc *nats.Conn) error {
	closed := make(chan struct{})
	prev := nc.ClosedHandler()
	nc.SetClosedHandler(func(c *nats.Conn) {
		if prev != nil {
			prev(c)
		}
		close(closed)
	})
	if err := nc.Drain(); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil
		}
		nc.Close()
		return fmt.Errorf("bus: drain connection: %w", err)
	}
	<-closed
	return nil
}
