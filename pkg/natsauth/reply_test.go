package natsauth_test

import (
	"testing"

	"github.com/nats-io/nkeys"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/natsauth"
)

// A service answers tenant A only on the default inbox or an inbox of one of A's
// credentials: never on another tenant's inbox (tenant ids that are prefixes of
// each other included), nor on any subject of the contract, KV or JetStream.
func TestReplyAllowedOnlyToTheRequestersInbox(t *testing.T) {
	id := rapid.StringMatching(`[A-Za-z0-9_-]{1,12}`)
	token := rapid.StringMatching(`[A-Za-z0-9]{1,22}`)
	rapid.Check(t, func(t *rapid.T) {
		ta := id.Draw(t, "a")
		tb := rapid.OneOf(id, rapid.Map(id, func(s string) string { return ta + "_" + s })).Draw(t, "b")
		if ta == tb {
			t.Skip("same tenant")
		}
		tok := token.Draw(t, "token")
		if own := natsauth.InboxPrefixFor(ta, realKey(t)) + "." + tok; !natsauth.ReplyAllowed(ta, own) {
			t.Fatalf("tenant %q refused its own inbox %s", ta, own)
		}
		if !natsauth.ReplyAllowed(ta, natsauth.DefaultInboxPrefix+tok) {
			t.Fatalf("tenant %q refused the default inbox", ta)
		}
		for _, reply := range []string{
			natsauth.InboxPrefixFor(tb, realKey(t)) + "." + tok,
			natsauth.InboxPrefixFor(ta, forged(t)) + "." + tok,
			natsauth.InboxPrefixFor(ta, realKey(t)) + ".>",
			natsauth.InboxPrefixFor(ta, realKey(t)),
			"memrpc." + tb + ".forget", "memrpc." + ta + ".reset", "mem." + tb + ".obs." + tok + ".s1",
			"$KV.agentmem_sessions." + tb + "." + tok, "$JS.API.STREAM.PURGE.AGENTMEM", "_INBOX.>", "_INBOX.", "",
		} {
			if natsauth.ReplyAllowed(ta, reply) {
				t.Fatalf("tenant %q may be answered on %q", ta, reply)
			}
		}
	})
}

// realKey is a new user public key.
func realKey(t *rapid.T) string {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// forged is a user public key with one character changed: its checksum no
// longer holds (a CRC-16 detects every change of one 5-bit character).
func forged(t *rapid.T) string {
	k := []byte(realKey(t))
	i := rapid.IntRange(1, len(k)-1).Draw(t, "forged at")
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	c := rapid.SampledFrom([]byte(alphabet)).Filter(func(c byte) bool { return c != k[i] }).Draw(t, "forged char")
	k[i] = c
	return string(k)
}
