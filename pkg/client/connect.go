package client

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/pkg/natsauth"
)

// Connect connects to the NATS server at url with the credentials file credsFile
// (from `agentmem creds add`; "" for none) and any further options. A tenant's
// credential limits its inboxes to a prefix written in the credential; Connect sets
// it (nats.CustomInboxPrefix), without which no publish acknowledgement or reply
// would reach the client. Pass the connection to New with the credential's tenant.
func Connect(url, credsFile string, opts ...nats.Option) (*nats.Conn, error) {
	if credsFile != "" {
		credOpts, err := natsauth.ClientOptions(credsFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		opts = append(credOpts, opts...)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w to %s: %w", ErrConnect, url, err)
	}
	return nc, nil
}
