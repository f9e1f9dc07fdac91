package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// chunkBytes is the chunk size asked of the server for a snapshot and used to send
// a restore: well under the default max_payload (1 MiB).
const chunkBytes = 128 << 10

// chunkTimeout bounds the wait for one chunk, or one chunk's ack: the server
// itself gives up on a snapshot whose receiver has not acked for 5 s.
const chunkTimeout = 30 * time.Second

// apiError is the error part of a JetStream API response.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

// StreamSnapshot is what the server says about a snapshot it starts: the stream's
// configuration and state at that moment.
type StreamSnapshot struct {
	Config jetstream.StreamConfig `json:"config"`
	State  jetstream.StreamState  `json:"state"`
}

// SnapshotStream writes a snapshot of stream (its messages and, with consumers,
// its durable consumers' positions) to w through the JetStream API
// ($JS.API.STREAM.SNAPSHOT), acknowledging each chunk as the `nats stream
// backup` command does; nats.go's jetstream package has no helper for it.
func SnapshotStream(ctx context.Context, nc *nats.Conn, stream string, w io.Writer) (StreamSnapshot, error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return StreamSnapshot{}, fmt.Errorf("%w: snapshot %s: %w", ErrStream, stream, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(map[string]any{"deliver_subject": inbox, "chunk_size": chunkBytes})
	var resp struct {
		StreamSnapshot
		Error *apiError `json:"error"`
	}
	if err := apiRequest(ctx, nc, "$JS.API.STREAM.SNAPSHOT."+stream, req, &resp); err != nil {
		return StreamSnapshot{}, fmt.Errorf("%w: snapshot %s: %w", ErrStream, stream, err)
	}
	if resp.Error != nil {
		return StreamSnapshot{}, fmt.Errorf("%w: snapshot %s: %s (%d)", ErrStream, stream, resp.Error.Description, resp.Error.ErrCode)
	}
	for {
		msg, err := nextChunk(ctx, sub)
		if err != nil {
			return StreamSnapshot{}, fmt.Errorf("%w: snapshot %s: waiting for a chunk: %w", ErrStream, stream, err)
		}
		if len(msg.Data) == 0 {
			// The end: status 204, or the server's reason for stopping.
			if st := msg.Header.Get("Status"); st != "" && st != "204" {
				return StreamSnapshot{}, fmt.Errorf("%w: snapshot %s: server stopped with %s %s", ErrStream, stream, st, msg.Header.Get("Description"))
			}
			return resp.StreamSnapshot, nil
		}
		if _, err := w.Write(msg.Data); err != nil {
			return StreamSnapshot{}, fmt.Errorf("%w: snapshot %s: %w", ErrStream, stream, err)
		}
		// Every chunk but a short last one asks for an ack: the server's window.
		if msg.Reply != "" {
			if err := nc.Publish(msg.Reply, nil); err != nil {
				return StreamSnapshot{}, fmt.Errorf("%w: snapshot %s: ack: %w", ErrStream, stream, err)
			}
		}
	}
}

// RestoreStream creates stream from a snapshot SnapshotStream wrote, with the
// configuration and state recorded with it, through the JetStream API
// ($JS.API.STREAM.RESTORE). The stream must not exist.
func RestoreStream(ctx context.Context, nc *nats.Conn, snap StreamSnapshot, r io.Reader) error {
	name := snap.Config.Name
	req, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	var resp struct {
		DeliverSubject string    `json:"deliver_subject"`
		Error          *apiError `json:"error"`
	}
	if err := apiRequest(ctx, nc, "$JS.API.STREAM.RESTORE."+name, req, &resp); err != nil {
		return fmt.Errorf("%w: restore %s: %w", ErrStream, name, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("%w: restore %s: %s (%d)", ErrStream, name, resp.Error.Description, resp.Error.ErrCode)
	}
	buf := make([]byte, chunkBytes)
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if _, err := request(ctx, nc, resp.DeliverSubject, buf[:n]); err != nil {
				return fmt.Errorf("%w: restore %s: send a chunk: %w", ErrStream, name, err)
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("%w: restore %s: %w", ErrStream, name, rerr)
		}
	}
	// An empty chunk ends the restore; its reply is the stream's creation.
	var done struct {
		Error *apiError `json:"error"`
	}
	if err := apiRequest(ctx, nc, resp.DeliverSubject, nil, &done); err != nil {
		return fmt.Errorf("%w: restore %s: %w", ErrStream, name, err)
	}
	if done.Error != nil {
		return fmt.Errorf("%w: restore %s: %s (%d)", ErrStream, name, done.Error.Description, done.Error.ErrCode)
	}
	return nil
}

// apiRequest sends a JetStream API request and decodes its reply into resp.
func apiRequest(ctx context.Context, nc *nats.Conn, subject string, req []byte, resp any) error {
	msg, err := request(ctx, nc, subject, req)
	if err != nil {
		return err
	}
	return json.Unmarshal(msg.Data, resp)
}

// request is a request bounded by chunkTimeout.
func request(ctx context.Context, nc *nats.Conn, subject string, data []byte) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, chunkTimeout)
	defer cancel()
	return nc.RequestWithContext(ctx, subject, data)
}

// nextChunk is sub's next message, waited for at most chunkTimeout.
func nextChunk(ctx context.Context, sub *nats.Subscription) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, chunkTimeout)
	defer cancel()
	return sub.NextMsgWithContext(ctx)
}
