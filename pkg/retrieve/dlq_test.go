package retrieve

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
)

// Issue 30: dlq.list and dlq.replay see only the requesting tenant's dead letters,
// whatever the selection: another tenant's (and one whose user token is no id,
// which is still its tenant's) are neither listed nor replayed, and naming one
// by sequence replays nothing at all.
func TestDeadLetterEndpointsKeepToTheTenant(t *testing.T) {
	r := newRig(t)
	r.start(Config{})
	ctx := context.Background()
	put := func(subject, class, body string) uint64 {
		msg := nats.NewMsg("memdlq.ingest")
		msg.Data = []byte(body)
		msg.Header.Set(bus.MetaSubject, subject)
		msg.Header.Set(bus.HeaderReasonClass, class)
		ack, err := r.js.PublishMsg(ctx, msg)
		must(t, err)
		return ack.Sequence
	}
	mine := put("mem."+tenant+".obs.u1.s1", bus.ClassRetriesExhausted, "one")
	other := put("mem.globex.obs.u1.s1", bus.ClassRetriesExhausted, "globex's")
	badUser := put("mem."+tenant+".obs.u%1.s1", bus.ClassMalformed, "bad user")
	prefix := put("mem."+tenant+"x.obs.u1.s1", bus.ClassMalformed, "a tenant whose id starts with ours")

	seqs := func(dls []events.DeadLetter) []uint64 {
		var out []uint64
		for _, dl := range dls {
			out = append(out, dl.Seq)
		}
		return out
	}
	list := ok[events.DLQListReply](t, r.call(events.EndpointDLQList, events.DLQListRequest{}))
	if got := seqs(list.DeadLetters); !slices.Equal(got, []uint64{mine, badUser}) || string(list.DeadLetters[0].Data) != "one" {
		t.Fatalf("dlq.list = %v (%+v), want %d and %d", got, list.DeadLetters, mine, badUser)
	}
	malformed := ok[events.DLQListReply](t, r.call(events.EndpointDLQList, events.DLQListRequest{Reason: bus.ClassMalformed}))
	if got := seqs(malformed.DeadLetters); !slices.Equal(got, []uint64{badUser}) {
		t.Fatalf("dlq.list reason malformed = %v, want %d", got, badUser)
	}
	if msg := failed(t, r.call(events.EndpointDLQReplay, events.DLQReplayRequest{Seqs: []uint64{mine, other}}), events.RPCCodeNotFound); !strings.Contains(msg, "no dead letter with sequence") {
		t.Fatalf("replay of another tenant's dead letter: %s", msg)
	}
	failed(t, r.call(events.EndpointDLQReplay, events.DLQReplayRequest{All: true, Reason: bus.ClassMalformed}), events.RPCCodeBadRequest)

	rep := ok[events.DLQReplayReply](t, r.call(events.EndpointDLQReplay, events.DLQReplayRequest{All: true}))
	if len(rep.Replayed) != 2 || rep.Replayed[0] != (events.DLQReplayed{Seq: mine, Subject: "mem." + tenant + ".obs.u1.s1"}) || rep.Replayed[1].Seq != badUser || rep.More {
		t.Fatalf("dlq.replay all = %+v", rep)
	}
	for seq, kept := range map[uint64]bool{mine: false, badUser: false, other: true, prefix: true} {
		_, err := bus.GetDeadLetter(ctx, r.js, bus.DefaultDLQStream, seq)
		if gone := errors.Is(err, jetstream.ErrMsgNotFound); gone == kept || (!gone && err != nil) {
			t.Errorf("dead letter %d: kept %v (%v), want kept %v", seq, !gone, err, kept)
		}
	}
	st, err := r.js.Stream(ctx, bus.DefaultStream)
	must(t, err)
	got, err := st.GetLastMsgForSubject(ctx, "mem."+tenant+".obs.u1.s1")
	if err != nil || string(got.Data) != "one" {
		t.Fatalf("the replayed dead letter in the event stream: %v %v", got, err)
	}
}
