package natsauth

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nats-io/jwt/v2"
)

// Trust is what a NATS server needs to run in operator mode for this deployment:
// the operator JWT, the system account and every account JWT (a memory resolver).
// It holds no secret.
type Trust struct {
	// OperatorJWT is the operator's self-signed JWT.
	OperatorJWT string
	// SystemAccount is the SYS account's public key.
	SystemAccount string
	// Account is the AGENTMEM account's public key.
	Account string
	// AccountJWTs maps each account's public key to its JWT.
	AccountJWTs map[string]string
}

// Trust signs the operator and account JWTs from the keys. AGENTMEM has JetStream
// without limits and revokes every credential the register says is revoked; SYS
// has none.
func (a *Authority) Trust() (Trust, error) {
	opPub, err := a.operator.PublicKey()
	if err != nil {
		return Trust{}, fmt.Errorf("%w: operator key: %w", ErrKeys, err)
	}
	sysPub, err := a.system.PublicKey()
	if err != nil {
		return Trust{}, fmt.Errorf("%w: system account key: %w", ErrKeys, err)
	}
	accPub := a.AccountPublicKey()

	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = operatorName
	oc.SystemAccount = sysPub
	opJWT, err := oc.Encode(a.operator)
	if err != nil {
		return Trust{}, fmt.Errorf("%w: sign operator: %w", ErrKeys, err)
	}

	sc := jwt.NewAccountClaims(sysPub)
	sc.Name = SystemAccountName
	sysJWT, err := sc.Encode(a.operator)
	if err != nil {
		return Trust{}, fmt.Errorf("%w: sign account %s: %w", ErrKeys, SystemAccountName, err)
	}

	revoked, err := a.revocations()
	if err != nil {
		return Trust{}, err
	}
	ac := jwt.NewAccountClaims(accPub)
	// Named by its public key, not AccountName: nats-server's /jsz reports an
	// account under its JWT name but selects it (?acc=) by public key, and KEDA's
	// nats-jetstream scaler asks with one value for both. Under any other name
	// the ScaledObjects would find no account and scale on nothing.
	ac.Name = accPub
	for key, at := range revoked {
		ac.RevokeAt(key, at)
	}
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit, Consumer: jwt.NoLimit}
	accJWT, err := ac.Encode(a.operator)
	if err != nil {
		return Trust{}, fmt.Errorf("%w: sign account %s: %w", ErrKeys, AccountName, err)
	}
	return Trust{
		OperatorJWT:   opJWT,
		SystemAccount: sysPub,
		Account:       accPub,
		AccountJWTs:   map[string]string{sysPub: sysJWT, accPub: accJWT},
	}, nil
}

// Operator decodes OperatorJWT.
func (t Trust) Operator() (*jwt.OperatorClaims, error) {
	oc, err := jwt.DecodeOperatorClaims(t.OperatorJWT)
	if err != nil {
		return nil, fmt.Errorf("%w: operator JWT: %w", ErrKeys, err)
	}
	return oc, nil
}

// ServerConfig is the trust in nats-server configuration syntax, for a server run
// from a config file (deploy/k8s includes it): operator, system account and a
// memory resolver preloaded with both accounts.
func (t Trust) ServerConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# agentmem NATS trust: operator, system account, accounts (no secrets).\n")
	fmt.Fprintf(&b, "# The %s account is %s.\n", AccountName, t.Account)
	fmt.Fprintf(&b, "operator: %s\n", t.OperatorJWT)
	fmt.Fprintf(&b, "system_account: %s\n", t.SystemAccount)
	fmt.Fprintf(&b, "resolver: MEMORY\n")
	fmt.Fprintf(&b, "resolver_preload: {\n")
	keys := make([]string, 0, len(t.AccountJWTs))
	for k := range t.AccountJWTs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %s\n", k, t.AccountJWTs[k])
	}
	fmt.Fprintf(&b, "}\n")
	return b.String()
}
