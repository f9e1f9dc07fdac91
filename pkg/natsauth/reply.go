package natsauth

import (
	"strings"

	"github.com/nats-io/nkeys"
)

// DefaultInboxPrefix is nats.go's inbox prefix: that of every client without a
// tenant credential (no authentication, or the service credential).
const DefaultInboxPrefix = "_INBOX."

// ReplyAllowed reports whether a service may answer a request of tenant on reply:
// the default inbox, or the inbox prefix of one of tenant's credentials
// (_INBOX_<tenant>_<user public key>.…).
//
// NATS checks a request's subject against the sender's permissions, never its reply
// subject, and the service credential may publish anywhere in the account: a reply
// to any other subject would publish, with the service's rights, to whatever a
// requester chose (another tenant's RPC, its stream subjects, KV, the JetStream
// API). The default inbox stays allowed because no tenant credential may
// subscribe there: a reply sent there reaches only a service-credential client
// waiting on that exact (random) inbox.
//
// A reply with a wildcard or a space is no inbox. The user key is checked as a key, not as a token, so that tenant "a" cannot
// name the inbox of tenant "a_b" (_INBOX_a_b_U…).
func ReplyAllowed(tenant, reply string) bool {
	if strings.ContainsAny(reply, "*> \t\r\n") {
		return false
	}
	if strings.HasPrefix(reply, DefaultInboxPrefix) {
		return len(reply) > len(DefaultInboxPrefix)
	}
	rest, ok := strings.CutPrefix(reply, inboxPrefixStart+tenant+"_")
	if !ok {
		return false
	}
	key, tail, ok := strings.Cut(rest, ".")
	return ok && tail != "" && nkeys.IsValidPublicUserKey(key)
}
