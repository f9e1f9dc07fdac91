package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Metadata keys the Subscriber adds to every message, next to the message headers.
// They travel into dead letters as headers, which is how a dead letter keeps its
// original subject and delivery count.
const (
	MetaSubject       = "subject"
	MetaStreamSeq     = "stream_seq"
	MetaDeliveryCount = "delivery_count"
	// MetaStoredTime is when the stream stored the message (RFC 3339, UTC): the
	// clock an event's ts is checked against (events.Admit).
	MetaStoredTime = "stored_ts"
)

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Conn is the connection to consume on; one per Subscriber. Required.
	Conn *nats.Conn
	// OwnConn makes Close drain and close Conn; by default the caller owns it.
	OwnConn bool
	// Stream holding the messages; default "AGENTMEM".
	Stream string
	// Consumer is the durable this Subscriber consumes; it is created or updated on
	// Subscribe. Required.
	Consumer ConsumerSpec
	// Concurrency is how many messages are handed out at once; default 1. It is
	// also the largest batch one pull request asks for. Each message stays
	// unacknowledged until its Watermill message is acked or nacked.
	Concurrency int
	// MaxProcessing bounds how long the Subscriber keeps extending the ack deadline
	// (with "in progress" acks, sent every half of the consumer's shortest ack
	// deadline) of a message whose handler is still running; after that the
	// server redelivers it. Default 5m: enough for the Router's retries at
	// their default handler timeout, short enough that a hung handler does not hold
	// a message forever. The time Gate is closed does not count: a handler waiting
	// out an outage is not hung.
	MaxProcessing time.Duration
	// Gate, if set, pauses pulling while it is closed (a model endpoint is down),
	// so that messages stay in the stream, their deliveries unused, instead of
	// being handed to handlers that can only wait.
	Gate Gate
	// CloseTimeout bounds how long Close waits for in-flight messages to be acked
	// or nacked; default 30s.
	CloseTimeout time.Duration
	// OrderKey, when set, names each message's ordering key (by its subject): the
	// messages of one key are handed out one at a time, each once the one
	// delivered before it is settled, so within a replica they are handled in
	// stream order. Messages whose key is "" are not ordered. A message that fails
	// and is redelivered comes back after those that followed it, and replicas
	// order only what each of them pulled.
	OrderKey func(subject string) string
}

func (c SubscriberConfig) withDefaults() SubscriberConfig {
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Concurrency == 0 {
		c.Concurrency = 1
	}
	if c.MaxProcessing == 0 {
		c.MaxProcessing = 5 * time.Minute
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 30 * time.Second
	}
	return c
}

// Validate reports configuration errors.
func (c SubscriberConfig) Validate() error {
	if c.Conn == nil {
		return fmt.Errorf("%w: subscriber: Conn is nil", ErrInvalidConfig)
	}
	if err := c.Consumer.Validate(); err != nil {
		return fmt.Errorf("subscriber: %w", err)
	}
	if c.Concurrency < 0 || c.MaxProcessing < 0 || c.CloseTimeout < 0 {
		return fmt.Errorf("%w: subscriber %s: Concurrency, MaxProcessing and CloseTimeout must not be negative", ErrInvalidConfig, c.Consumer.Durable)
	}
	return nil
}

// Subscriber is a Watermill message.Subscriber over one JetStream durable pull
// consumer. The topic passed to Subscribe (the Router's subscribe topic) is the
// durable's name, not a subject: the subjects are the durable's FilterSubjects.
// Replicas subscribing with the same durable split the messages between them.
//
// Each message is held unacknowledged until its Watermill message is acked (then
// the JetStream message is acked and the ack confirmed) or nacked (then it is
// nak'ed and redelivered). Close, or cancelling the Subscribe context, stops
// pulling, hands out what the last pull brought (handing back, with a delay,
// what no reader takes) and waits until every message handed out is settled.
// The context of the messages does not end with the Subscribe context, so that
// handlers in flight finish during a graceful shutdown (the Router's Timeout
// middleware bounds them).
type Subscriber struct {
	cfg    SubscriberConfig
	js     jetstream.JetStream
	logger *zap.Logger

	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed by Close: stop pulling
	abandon chan struct{} // closed when Close gives up waiting for in-flight messages
	running sync.WaitGroup
}

var _ message.Subscriber = (*Subscriber)(nil)

// NewSubscriber returns a Subscriber; nothing is sent to the server before Subscribe.
func NewSubscriber(cfg SubscriberConfig, logger *zap.Logger) (*Subscriber, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("%w: subscriber: %w", ErrInvalidConfig, err)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	cfg = cfg.withDefaults()
	return &Subscriber{
		cfg:     cfg,
		js:      js,
		logger:  logger.With(zap.String("stream", cfg.Stream), zap.String("consumer", cfg.Consumer.Durable)),
		closing: make(chan struct{}),
		abandon: make(chan struct{}),
	}, nil
}

// Subscribe provisions the durable named topic and streams its messages until ctx
// ends or Close is called; the channel is closed once every message handed out has
// been acked or nacked (or Close gave up on it).
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if topic != s.cfg.Consumer.Durable {
		return nil, fmt.Errorf("%w: subscriber: topic %q is not this subscriber's durable %q (the topic names the durable, not a subject)",
			ErrInvalidConfig, topic, s.cfg.Consumer.Durable)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: subscribe to %s", ErrClosed, topic)
	}
	cons, err := ProvisionConsumer(ctx, s.js, s.cfg.Stream, s.cfg.Consumer)
	if err != nil {
		return nil, err
	}
	out := make(chan *message.Message)
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-s.closing:
		}
		close(stop)
	}()
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		s.run(context.WithoutCancel(ctx), cons, out, stop)
	}()
	return out, nil
}

// run pulls in batches: each Fetch asks for as many messages as there are free
// processing slots (Concurrency in all), and each message holds its slot in its own
// goroutine until it is settled. One request per batch instead of one per message is
// what lets a batching handler see many messages at once. Unlike a prefetching
// iterator, a fetch is never abandoned: on stop the loop lets its outstanding pull
// request finish (at most pullWait) and hands out what it brought, so a shutdown
// delays no message by a whole ack deadline.
func (s *Subscriber) run(msgCtx context.Context, cons jetstream.Consumer, out chan<- *message.Message, stop <-chan struct{}) {
	slots := make(chan struct{}, s.cfg.Concurrency)
	fl := newFlight(s)
	for {
		n := acquireSlots(slots, stop)
		if n > 0 && !s.waitGate(stop) {
			for range n {
				<-slots
			}
			n = 0
		}
		if n == 0 || !s.pull(msgCtx, cons, n, slots, fl, out, stop) {
			break
		}
	}
	fl.stop()
	close(out)
}

// acquireSlots waits for one free slot, then takes every other free one; it returns
// how many it took, 0 once stop is closed.
func acquireSlots(slots chan struct{}, stop <-chan struct{}) int {
	select {
	case slots <- struct{}{}:
	case <-stop:
		return 0
	}
	n := 1
	for n < cap(slots) {
		select {
		case slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

// takeSlot waits for a free slot; false once stop is closed.
func takeSlot(slots chan struct{}, stop <-chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		return true
	case <-stop:
		return false
	}
}

// waitGate waits while the Gate is closed; false when stop closed first.
func (s *Subscriber) waitGate(stop <-chan struct{}) bool {
	g := s.cfg.Gate
	if g == nil || !g.Closed() {
		return true
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	s.logger.Info("pulling paused: a dependency of the handlers is unavailable")
	if err := g.Wait(ctx); err != nil {
		return false
	}
	s.logger.Info("pulling resumed", zap.Duration("paused_for", time.Since(start)))
	return true
}

// pullWait is how long one pull request waits for messages; it bounds how long
// Close waits for an idle pull to end.
const pullWait = time.Second

// pull fetches up to n messages, the n slots it was given, and starts processing
// each as it arrives; the slots of messages that did not come are released. It
// returns false when the connection is closed for good, which ends the subscription
// (and so the Router's handler) instead of retrying forever.
func (s *Subscriber) pull(msgCtx context.Context, cons jetstream.Consumer, n int, slots chan struct{}, fl *flight, out chan<- *message.Message, stop <-chan struct{}) bool {
	release := func() { <-slots }
	used := 0
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(pullWait))
	if err == nil {
		for msg := range batch.Messages() {
			used++
			if !s.wants(msg.Subject()) {
				s.skip(msg)
				release()
				continue
			}
			// Converted here, on the long-lived pull goroutine: parsing the
			// metadata on the message's fresh goroutine grew its stack, a stack
			// copy per message.
			wm, err := toWatermill(msg)
			if err != nil {
				// Not a JetStream delivery (no metadata); nothing to ack.
				s.logger.Error("dropping message without JetStream metadata", zap.String("subject", msg.Subject()), zap.Error(err))
				release()
				continue
			}
			wm.SetContext(msgCtx)
			// The turn is taken here, on the pull goroutine, so that turns follow
			// the delivery order.
			turn := fl.takeTurn(s.orderKey(msg.Subject()))
			fl.running.Go(func() {
				defer turn.end()
				if turn.queued() {
					// A message waiting for its turn holds no processing slot:
					// one key's backlog must not stall the other keys.
					release()
					if !turn.wait(fl, msg, stop) || !takeSlot(slots, stop) {
						s.handBack(msg)
						return
					}
				}
				defer release()
				s.process(fl, msg, wm, out, stop)
			})
		}
		err = batch.Error()
	}
	for range n - used {
		release()
	}
	switch {
	case err == nil, errors.Is(err, nats.ErrTimeout):
		return true
	case errors.Is(err, nats.ErrConnectionClosed):
		s.logger.Error("connection closed; subscription ended", zap.Error(err))
		return false
	}
	s.logger.Warn("pulling messages", zap.Error(err))
	// Do not spin while the server or the consumer is unavailable.
	select {
	case <-stop:
	case <-time.After(pullWait):
	}
	return true
}

func (s *Subscriber) orderKey(subject string) string {
	if s.cfg.OrderKey == nil {
		return ""
	}
	return s.cfg.OrderKey(subject)
}

// wants reports whether a message on subject is for the Router: always, unless
// the consumer filters on the client and subject matches none of its filters (and
// is not an unrouted subject the consumer claims, see ConsumerSpec.ClaimUnrouted).
func (s *Subscriber) wants(subject string) bool {
	if !s.cfg.Consumer.FilterOnClient {
		return true
	}
	for _, f := range s.cfg.Consumer.FilterSubjects {
		if server.SubjectMatchesFilter(subject, f) {
			return true
		}
	}
	return s.cfg.Consumer.ClaimUnrouted && !Routed(subject)
}

// skip acks a message the consumer does not handle. The ack is not confirmed: a
// lost one only brings the message back, to be skipped again.
func (s *Subscriber) skip(msg jetstream.Msg) {
	if err := msg.Ack(); err != nil {
		s.logger.Debug("acking a skipped message", zap.String("subject", msg.Subject()), zap.Error(err))
	}
}

// ackTimeout bounds the wait for the consumer's confirmation of an ack.
const ackTimeout = 5 * time.Second

// process hands one message to the Router and settles it with the server,
// extending its ack deadline at fl's heartbeats until MaxProcessing has passed.
//
// A fetched message is handed out even after stop: the Router reads until the
// channel closes, so it takes it at once. Only a reader that stopped reading
// does not; after handOutGrace the message goes back, with a delay that outlasts
// the pull request still open. A plain nak went straight back into that pull,
// which took it again and again: a graceful stop used up messages' MaxDeliver
// within milliseconds, and the server dropped them.
func (s *Subscriber) process(fl *flight, msg jetstream.Msg, wm *message.Message, out chan<- *message.Message, stop <-chan struct{}) {
	select {
	case out <- wm:
	case <-stop:
		t := time.NewTimer(handOutGrace)
		defer t.Stop()
		select {
		case out <- wm:
		case <-t.C:
			s.handBack(msg)
			return
		}
	}
	started, beat := time.Now(), fl.nextBeat()
	for {
		select {
		case <-wm.Acked():
			// A confirmed ack: an ack lost on the way would redeliver a processed
			// message, and an unconfirmed one may still sit in the connection's
			// buffer when Close returns. The consumer's reply is the confirmation;
			// a flush only tells that the server read the ack, which its consumer
			// may not have applied when the server stops (measured: the durable
			// lost its position over a restart).
			ackCtx, cancel := context.WithTimeout(context.Background(), ackTimeout)
			defer cancel()
			if err := msg.DoubleAck(ackCtx); err != nil {
				s.messageLogger(msg, wm).Warn("ack not confirmed; the message may be redelivered", zap.Error(err))
			}
			return
		case <-wm.Nacked():
			if wm.Metadata.Get(MetaHeld) != "" {
				// Held by the Router: redelivered after the ack deadline, not at
				// once into a pull request still open.
				s.messageLogger(msg, wm).Debug("message held; redelivered after its ack deadline")
				return
			}
			if err := s.nak(msg); err != nil {
				s.messageLogger(msg, wm).Warn("nak failed; the message is redelivered after its ack deadline", zap.Error(err))
			}
			return
		case <-beat:
			if s.cfg.Gate != nil && s.cfg.Gate.Closed() {
				started = time.Now() // waiting out an outage: not hung
			}
			if time.Since(started) >= s.cfg.MaxProcessing {
				beat = nil
				s.messageLogger(msg, wm).Warn("handler still running after MaxProcessing; letting the server redeliver the message",
					zap.Duration("max_processing", s.cfg.MaxProcessing))
				continue
			}
			beat = fl.nextBeat()
			if err := msg.InProgress(); err != nil {
				s.messageLogger(msg, wm).Warn("extending the ack deadline", zap.Error(err))
			}
		case <-s.abandon:
			s.messageLogger(msg, wm).Warn("closed before the message was acked or nacked; it will be redelivered")
			return
		}
	}
}

// handOutGrace is how long a message fetched at a stop waits to be taken before
// it is handed back; handBackDelay is when the server redelivers it, longer than
// the open pull request lives (pullWait).
const (
	handOutGrace  = 100 * time.Millisecond
	handBackDelay = 2 * pullWait
)

// handBack returns a message nobody took at a stop, redelivered after
// handBackDelay: to a replica, or to this worker when it starts again.
func (s *Subscriber) handBack(msg jetstream.Msg) {
	if err := msg.NakWithDelay(handBackDelay); err != nil {
		s.logger.Debug("handing back a message not taken at stop", zap.String("subject", msg.Subject()), zap.Error(err))
	}
}

// messageLogger is the logger for msg; built only when something is logged, as
// zap encodes the fields of With at once.
func (s *Subscriber) messageLogger(msg jetstream.Msg, wm *message.Message) *zap.Logger {
	return s.logger.With(zap.String("subject", msg.Subject()), zap.String("message_uuid", wm.UUID), zap.String("stream_seq", wm.Metadata.Get(MetaStreamSeq)))
}

// nak naks msg and waits for the server to confirm it (the server answers an ack
// that has a reply subject once it processed it), so that a nak sent just before a
// shutdown is not lost: a lost nak delays the redelivery by a whole ack deadline.
func (s *Subscriber) nak(msg jetstream.Msg) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.cfg.Conn.RequestWithContext(ctx, msg.Reply(), []byte("-NAK"))
	return err
}

// Close stops pulling, hands out what the last pull brought (see process) and
// waits up to CloseTimeout for every message handed out to be acked or nacked;
// then it closes the connection if the Subscriber owns it. The Router calls it when it closes.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.running.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-time.After(s.cfg.CloseTimeout):
		close(s.abandon)
		<-done
		err = fmt.Errorf("bus: subscriber %s: in-flight messages not settled within %s; they will be redelivered", s.cfg.Consumer.Durable, s.cfg.CloseTimeout)
	}
	if s.cfg.OwnConn {
		err = errors.Join(err, drainConn(s.cfg.Conn))
	}
	return err
}

// toWatermill converts a JetStream delivery: UUID from Nats-Msg-Id (else stream and
// sequence), metadata from the application headers plus subject, stream sequence
// and delivery count.
func toWatermill(msg jetstream.Msg) (*message.Message, error) {
	md, err := msg.Metadata()
	if err != nil {
		return nil, err
	}
	uuid := msg.Headers().Get(jetstream.MsgIDHeader)
	if uuid == "" {
		uuid = md.Stream + "-" + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	wm := message.NewMessage(uuid, msg.Data())
	wm.Metadata = appHeaders(msg.Headers(), 3)
	wm.Metadata.Set(MetaSubject, msg.Subject())
	wm.Metadata.Set(MetaStreamSeq, strconv.FormatUint(md.Sequence.Stream, 10))
	wm.Metadata.Set(MetaDeliveryCount, strconv.FormatUint(md.NumDelivered, 10))
	wm.Metadata.Set(MetaStoredTime, md.Timestamp.UTC().Format(time.RFC3339Nano))
	return wm, nil
}

// appHeaders keeps the application headers and Nats-Msg-Id. Other "Nats-" headers are
// directives to the server (expected sequence, TTL, rollup, ...) or set by it;
// carried over into a dead letter or a replay they would make that publish fail.
// It has room for extra keys more, so that adding them does not grow it.
func appHeaders(h nats.Header, extra int) message.Metadata {
	md := make(message.Metadata, len(h)+extra)
	for k, v := range h {
		if len(v) == 0 || (strings.HasPrefix(k, "Nats-") && k != jetstream.MsgIDHeader) {
			continue
		}
		md[k] = v[0]
	}
	return md
}
