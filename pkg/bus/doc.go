// Package bus is agentmem's NATS plumbing: the embedded JetStream server, client
// connections, stream and consumer provisioning, the Watermill adapters and the
// dead-letter stream.
//
// # Why adapters of our own
//
// watermill-nats v2.1.3 does not fit: its pkg/jetstream (beta) treats the topic as a
// stream name, its grouped consumer is ephemeral, its ConfigureConsumer is never
// applied and an unmarshal error can panic; its pkg/nats uses the older JetStream API
// and deletes a durable it created on Close; both close the *nats.Conn they were
// given. Publisher and Subscriber here are small adapters over nats.go/jetstream:
// the durable consumers are real, provisioned by this package with explicit
// AckWait, MaxDeliver and BackOff, survive restarts, and are shared by replicas;
// each Publisher or Subscriber uses one connection it closes only when told it owns
// it (OwnConn). Watermill is kept for its Router middleware.
//
// # Streams and consumers
//
// ProvisionStreams creates AGENTMEM (mem.>) and AGENTMEM_DLQ (memdlq.>) on file
// storage with a duplicate window, so a publish repeating a Nats-Msg-Id is stored
// once (the Publisher sends the Watermill UUID, i.e. the event ID, as Nats-Msg-Id).
//
// WorkerConsumer gives each worker one durable with a stable name for KEDA
// (agentmem-ingest, agentmem-extractor, agentmem-consolidator): explicit acks,
// deliver all, AckWait 30s, MaxDeliver 5, BackOff [30s 1m 5m]. nats-server uses
// BackOff[i] as the ack deadline of delivery i+1 and sets AckWait to BackOff[0], so
// BackOff starts at AckWait (a shorter first entry would redeliver a slow handler's
// message to another replica while it still runs); ConsumerSpec.Validate rejects
// the combinations the server would refuse or silently change. BackOff only applies
// to ack timeouts, i.e. to a worker that crashed or hung; failures a handler
// reports are retried in-process by the Router. While a handler runs, the
// Subscriber extends the ack deadline with "in progress" acks (up to MaxProcessing).
//
// # Router middleware, outermost first
//
//	CorrelationID → PoisonQueue → Retry → Timeout → Recoverer → handler
//
// Recoverer is innermost so a panic becomes an ordinary error; Timeout gives each
// attempt its own deadline; Retry retries with exponential backoff except errors
// marked Permanent (malformed input), which go straight on; PoisonQueue, outside
// Retry, publishes only what exhausted its retries (or was permanent) to
// memdlq.<worker> and lets the Router ack it. A dead letter carries the original
// headers plus reason_poisoned, subject, stream_seq and delivery_count.
//
// Messages that never got an ack or nack (a worker crashing on every delivery) come
// back until the Router sees a delivery count above MaxDeliver and dead-letters
// them with reason "max deliveries exceeded" before the handler runs: the server
// itself never drops a message. ListDeadLetters and ReplayDeadLetter back
// `agentmem dlq list/replay`.
package bus
