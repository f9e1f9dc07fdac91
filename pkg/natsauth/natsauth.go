// Package natsauth is tenant isolation at the transport: the NATS decentralised JWT
// trust chain (operator → accounts → users) of an agentmem deployment, and the
// credentials it issues.
//
// One operator signs two accounts: SYS (the server's system account) and AGENTMEM,
// which holds the event stream, the KV buckets and every user. Users are of two
// kinds:
//
//   - the service user (workers and the retriever): no permissions, so everything
//     in the AGENTMEM account, including replies to any tenant's inbox; which is
//     why every responder checks a request's reply subject (ReplyAllowed);
//   - a tenant user, of role agent or admin: may publish only mem.<tenant>.obs.>
//     and mem.<tenant>.ended.>, request the memrpc.<tenant> endpoints of its role
//     (an agent: events.AgentEndpoints; an admin: all), and subscribe only to its
//     own inbox prefix (_INBOX_<tenant>_<user public key>.>), where JetStream's
//     publish acknowledgements and the retriever's replies arrive. Everything else
//     ($JS.API, $KV, the services' subjects, other tenants' subjects and inboxes)
//     is refused by the server.
//
// The keys (nkey seeds) live in one directory, files mode 0600, created on first use;
// issuing a credential is signing a user JWT with the account key, offline: the
// server trusts every user the account key signs, so adding a tenant changes nothing
// on the server. Each credential issued is recorded in a register in the same
// directory (List); a revocation is recorded there too (Revoke), signed into the
// account JWT by Trust and pushed to a running server (Push). The inbox prefix is
// written in the credential itself (the tenant user's only subscribe permission),
// so a client reads it from its .creds file (ClientOptions) and needs no other
// setting.
package natsauth

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
)

// Sentinel errors; every error of this package wraps one of them.
var (
	// ErrInvalidConfig: New was given a Config that cannot work.
	ErrInvalidConfig = errors.New("natsauth: invalid config")
	// ErrKeys: the key directory or a key in it cannot be created or read.
	ErrKeys = errors.New("natsauth: signing keys")
	// ErrInvalidTenant: a tenant id that events.ValidateID rejects.
	ErrInvalidTenant = errors.New("natsauth: invalid tenant")
	// ErrCreds: a credentials file that cannot be read, parsed or written.
	ErrCreds = errors.New("natsauth: credentials")
	// ErrInvalidRole: a role that is not agent or admin.
	ErrInvalidRole = errors.New("natsauth: invalid role")
	// ErrInvalidAgent: an agent id that events.ValidateAgentID rejects.
	ErrInvalidAgent = errors.New("natsauth: invalid agent")
)

// Names of the accounts and of the key files in Config.Dir.
const (
	AccountName       = "AGENTMEM"
	SystemAccountName = "SYS"
	operatorName      = "agentmem"
	serviceUserName   = "agentmem-service"

	operatorKeyFile = "operator.nk"
	accountKeyFile  = "account.nk"
	systemKeyFile   = "system.nk"

	// tenantTag marks a tenant user's JWT; its name is the tenant id.
	tenantTag = "agentmem-tenant"
	// roleTag+role marks a tenant user's role; a tenant JWT without one predates
	// roles and may request every endpoint (RoleAdmin).
	roleTag = "agentmem-role-"
	// agentTag+hex(agent id) marks an agent credential bound to one agent's
	// scope. Hex, because NATS lowercases tags and agent ids are case-sensitive.
	agentTag = "agentmem-agent-"
	// serviceTag marks the service user's JWT.
	serviceTag = "agentmem-service"
	// inboxPrefixStart starts every tenant inbox prefix.
	inboxPrefixStart = "_INBOX_"
)

// Config configures an Authority.
type Config struct {
	// Dir holds the operator's and the accounts' nkey seeds (mode 0600, the directory
	// 0700); created with fresh keys when missing. Required. Whoever can read it can
	// issue any credential: keep it with the operator, not on agents' machines.
	Dir string
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.Dir == "" {
		return fmt.Errorf("%w: Dir is required", ErrInvalidConfig)
	}
	return nil
}

// Authority holds the signing keys of one deployment and issues its credentials and
// its server trust configuration.
type Authority struct {
	cfg      Config
	logger   *zap.Logger
	operator nkeys.KeyPair
	account  nkeys.KeyPair
	system   nkeys.KeyPair
}

// New loads the keys under cfg.Dir, creating the directory and any missing key.
func New(cfg Config, logger *zap.Logger) (*Authority, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: directory %s: %w", ErrKeys, cfg.Dir, err)
	}
	a := &Authority{cfg: cfg, logger: logger}
	var err error
	if a.operator, err = a.loadOrCreate(operatorKeyFile, nkeys.CreateOperator, nkeys.IsValidPublicOperatorKey); err != nil {
		return nil, err
	}
	if a.account, err = a.loadOrCreate(accountKeyFile, nkeys.CreateAccount, nkeys.IsValidPublicAccountKey); err != nil {
		return nil, err
	}
	if a.system, err = a.loadOrCreate(systemKeyFile, nkeys.CreateAccount, nkeys.IsValidPublicAccountKey); err != nil {
		return nil, err
	}
	return a, nil
}

// loadOrCreate reads the seed in name, or creates one. A new seed is written to a
// temporary file and linked into place, so that two processes starting at once
// (`up --auth` and `creds add`) agree on one key and nobody reads half a seed.
func (a *Authority) loadOrCreate(name string, create func() (nkeys.KeyPair, error), valid func(string) bool) (nkeys.KeyPair, error) {
	path := filepath.Join(a.cfg.Dir, name)
	for range 2 {
		seed, err := os.ReadFile(path)
		if err == nil {
			return a.parseSeed(path, seed, valid)
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: %w", ErrKeys, path, err)
		}
		kp, err := create()
		if err != nil {
			return nil, fmt.Errorf("%w: create %s: %w", ErrKeys, name, err)
		}
		seed, err = kp.Seed()
		if err != nil {
			return nil, fmt.Errorf("%w: create %s: %w", ErrKeys, name, err)
		}
		tmp, err := writeTemp(a.cfg.Dir, name, seed)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrKeys, path, err)
		}
		err = os.Link(tmp, path)
		_ = os.Remove(tmp)
		if err == nil {
			a.logger.Info("natsauth: created signing key", zap.String("file", path))
			return kp, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%w: %s: %w", ErrKeys, path, err)
		}
		// Another process created it meanwhile: read theirs.
	}
	return nil, fmt.Errorf("%w: %s keeps changing", ErrKeys, path)
}

func (a *Authority) parseSeed(path string, seed []byte, valid func(string) bool) (nkeys.KeyPair, error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		a.logger.Warn("natsauth: signing key is readable by others; chmod 600 it", zap.String("file", path), zap.String("mode", fi.Mode().Perm().String()))
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not an nkey seed", ErrKeys, path)
	}
	pub, err := kp.PublicKey()
	if err != nil || !valid(pub) {
		return nil, fmt.Errorf("%w: %s holds the wrong kind of key", ErrKeys, path)
	}
	return kp, nil
}

// writeTemp writes data to a new file of mode 0600 in dir and returns its path.
func writeTemp(dir, name string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return "", err
	}
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return "", err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// AccountPublicKey is the AGENTMEM account's public key: the account name the
// server's monitoring endpoints (/jsz, so KEDA's scaler) report.
func (a *Authority) AccountPublicKey() string {
	pub, _ := a.account.PublicKey()
	return pub
}

// Role is what a tenant credential may do in its tenant.
type Role string

// Roles of tenant credentials.
const (
	// RoleAgent observes, ends sessions and requests events.AgentEndpoints: what
	// an agent needs, nothing that erases or exports the tenant. Bound to an
	// agent (AgentCreds), it also writes that agent's scope.
	RoleAgent Role = "agent"
	// RoleAdmin requests every endpoint of its tenant.
	RoleAdmin Role = "admin"
	// RoleService is the service credential's: the whole account.
	RoleService Role = "service"
)

// ParseRole parses a tenant credential's role; "" is RoleAgent.
func ParseRole(s string) (Role, error) {
	switch Role(s) {
	case "", RoleAgent:
		return RoleAgent, nil
	case RoleAdmin:
		return RoleAdmin, nil
	}
	return "", fmt.Errorf("%w: %q (want %s or %s)", ErrInvalidRole, s, RoleAgent, RoleAdmin)
}

// TenantPermissions are a tenant user's permissions: publish its observations
// and session ends (never the subjects the services publish: write, hit,
// written, summary, consolidate), request the endpoints of its role, subscribe
// to its inbox prefix, nothing else.
func TenantPermissions(tenant, inboxPrefix string, role Role) jwt.Permissions {
	pub := jwt.StringList{
		"mem." + tenant + ".obs.>",
		"mem." + tenant + ".ended.>",
	}
	if role == RoleAdmin {
		pub.Add("memrpc." + tenant + ".>")
	} else {
		for _, ep := range events.AgentEndpoints {
			pub.Add(events.RPCPrefix + "." + tenant + "." + ep)
		}
	}
	return jwt.Permissions{
		Pub: jwt.Permission{Allow: pub},
		Sub: jwt.Permission{Allow: jwt.StringList{inboxPrefix + ".>"}},
	}
}

// AgentPermissions are the permissions of an agent credential bound to
// agentID: TenantPermissions of RoleAgent, and the agent-scope writes of
// agentID alone (events.AgentRPCSubject: memrpc.<tenant>.agent.<agent_id>.<op>,
// no wildcard), so the server refuses it every other agent's scope.
func AgentPermissions(tenant, inboxPrefix, agentID string) (jwt.Permissions, error) {
	perm := TenantPermissions(tenant, inboxPrefix, RoleAgent)
	for _, ep := range events.AgentScopeEndpoints {
		subject, err := events.AgentRPCSubject(tenant, agentID, ep)
		if err != nil {
			return jwt.Permissions{}, fmt.Errorf("%w: %w", ErrInvalidAgent, err)
		}
		perm.Pub.Allow.Add(subject)
	}
	return perm, nil
}

// InboxPrefixFor is the inbox prefix of tenant's user with public key userPub.
func InboxPrefixFor(tenant, userPub string) string {
	return inboxPrefixStart + tenant + "_" + userPub
}

// TenantCreds issues a new credential (.creds file content: user JWT and nkey seed)
// for tenant with role (RoleAgent or RoleAdmin). Each call makes a new user with
// its own key and inbox prefix, recorded in the register (List).
func (a *Authority) TenantCreds(tenant string, role Role) ([]byte, error) {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTenant, err)
	}
	if role != RoleAgent && role != RoleAdmin {
		return nil, fmt.Errorf("%w: %q is not a tenant role", ErrInvalidRole, role)
	}
	return a.issue(tenant, role, "", func(uc *jwt.UserClaims, pub string) error {
		uc.Tags.Add(tenantTag, roleTag+string(role))
		uc.Permissions = TenantPermissions(tenant, InboxPrefixFor(tenant, pub), role)
		return nil
	})
}

// AgentCreds issues a new agent credential for tenant bound to agentID
// (AgentPermissions): what TenantCreds(tenant, RoleAgent) may do, and write
// agentID's scope. The agent id is in the credential (Identity.AgentID).
func (a *Authority) AgentCreds(tenant, agentID string) ([]byte, error) {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTenant, err)
	}
	if err := events.ValidateAgentID(agentID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidAgent, err)
	}
	return a.issue(tenant, RoleAgent, agentID, func(uc *jwt.UserClaims, pub string) (err error) {
		uc.Tags.Add(tenantTag, roleTag+string(RoleAgent), agentTag+hex.EncodeToString([]byte(agentID)))
		uc.Permissions, err = AgentPermissions(tenant, InboxPrefixFor(tenant, pub), agentID)
		return err
	})
}

// ServiceCreds issues a new credential for workers and the retriever: the whole
// AGENTMEM account.
func (a *Authority) ServiceCreds() ([]byte, error) {
	return a.issue(serviceUserName, RoleService, "", func(uc *jwt.UserClaims, _ string) error {
		uc.Tags.Add(serviceTag)
		return nil
	})
}

func (a *Authority) issue(name string, role Role, agentID string, shape func(*jwt.UserClaims, string) error) ([]byte, error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("%w: create user key: %w", ErrCreds, err)
	}
	pub, err := user.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: user key: %w", ErrCreds, err)
	}
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	if err := shape(uc, pub); err != nil {
		return nil, err
	}
	token, err := uc.Encode(a.account)
	if err != nil {
		return nil, fmt.Errorf("%w: sign user %s: %w", ErrCreds, name, err)
	}
	seed, err := user.Seed()
	if err != nil {
		return nil, fmt.Errorf("%w: user seed: %w", ErrCreds, err)
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return nil, fmt.Errorf("%w: format: %w", ErrCreds, err)
	}
	tenant := ""
	if role != RoleService {
		tenant = name
	}
	if err := a.record(entry{Key: pub, Tenant: tenant, Role: role, Agent: agentID, IssuedAt: time.Unix(uc.IssuedAt, 0).UTC()}); err != nil {
		return nil, err
	}
	return creds, nil
}

// ServiceCredsFile is the name, in Config.Dir, of the service credential
// WriteServiceCreds writes.
const ServiceCredsFile = "service.creds"

// KeyDir is the key directory of a data directory: `agentmem up --auth` and
// `agentmem creds` keep the keys there.
func KeyDir(dataDir string) string { return filepath.Join(dataDir, "auth") }

// WriteServiceCreds returns the path of Dir/service.creds (mode 0600), the
// service credential `agentmem up --auth` connects its own components with: the
// one stored there while this account signed it and it is not revoked, else a
// new one issued into it. Every start reusing it keeps the register at one
// service credential, and revoking it (Revoke with tenant "") rotates it at
// the next start.
func (a *Authority) WriteServiceCreds() (string, error) {
	path := filepath.Join(a.cfg.Dir, ServiceCredsFile)
	if ok, err := a.serviceCredsUsable(path); ok || err != nil {
		return path, err
	}
	creds, err := a.ServiceCreds()
	if err != nil {
		return "", err
	}
	if err := WriteCreds(path, creds); err != nil {
		return "", err
	}
	return path, nil
}

// serviceCredsUsable reports whether the file at path is a service credential
// whose JWT this account signed, whose seed is the JWT's key, and which the
// register does not revoke. A missing or unusable file is not an error: a new
// credential replaces it.
func (a *Authority) serviceCredsUsable(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: %s: %w", ErrCreds, path, err)
	}
	token, err := jwt.ParseDecoratedJWT(data)
	if err != nil {
		return false, nil
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil || uc.Issuer != a.AccountPublicKey() || !uc.Tags.Contains(serviceTag) {
		return false, nil
	}
	kp, err := jwt.ParseDecoratedUserNKey(data)
	if err != nil {
		return false, nil
	}
	if pub, err := kp.PublicKey(); err != nil || pub != uc.Subject {
		return false, nil
	}
	revoked, err := a.revocations()
	if err != nil {
		return false, err
	}
	_, gone := revoked[uc.Subject]
	return !gone, nil
}

// WriteCreds writes creds to path with mode 0600, replacing a file there.
func WriteCreds(path string, creds []byte) error {
	dir := filepath.Dir(path)
	tmp, err := writeTemp(dir, filepath.Base(path), creds)
	if err != nil {
		return fmt.Errorf("%w: write %s: %w", ErrCreds, path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("%w: write %s: %w", ErrCreds, path, err)
	}
	return nil
}

// Identity is what a credential says about its user.
type Identity struct {
	// PublicKey is the user's nkey public key.
	PublicKey string
	// Tenant is the tenant of a tenant credential; "" for the service credential or
	// a credential issued by someone else.
	Tenant string
	// InboxPrefix is the prefix the client must use for its inboxes; "" when the
	// credential may use the default _INBOX.
	InboxPrefix string
	// Role is the tenant credential's role, RoleService for the service's, ""
	// for a credential issued by someone else.
	Role Role
	// AgentID is the agent an agent credential is bound to (AgentCreds); ""
	// for any other credential.
	AgentID string
}

// Inspect reads the user JWT of creds (the content of a .creds file) without
// verifying it: the server does that.
func Inspect(creds []byte) (Identity, error) {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrCreds, err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: user JWT: %w", ErrCreds, err)
	}
	id := Identity{PublicKey: uc.Subject}
	switch {
	case uc.Tags.Contains(tenantTag):
		id.Tenant, id.Role = uc.Name, RoleAdmin
		if uc.Tags.Contains(roleTag + string(RoleAgent)) {
			id.Role = RoleAgent
		}
		for _, tag := range uc.Tags {
			if h, ok := strings.CutPrefix(tag, agentTag); ok {
				agent, err := hex.DecodeString(h)
				if err != nil {
					return Identity{}, fmt.Errorf("%w: agent tag %q is not hex", ErrCreds, tag)
				}
				id.AgentID = string(agent)
			}
		}
	case uc.Tags.Contains(serviceTag):
		id.Role = RoleService
	}
	if allow := uc.Sub.Allow; len(allow) == 1 && strings.HasPrefix(allow[0], inboxPrefixStart) && strings.HasSuffix(allow[0], ".>") {
		id.InboxPrefix = strings.TrimSuffix(allow[0], ".>")
	}
	return id, nil
}

// InspectFile is Inspect of the file at path.
func InspectFile(path string) (Identity, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrCreds, err)
	}
	id, err := Inspect(data)
	if err != nil {
		return Identity{}, fmt.Errorf("%s: %w", path, err)
	}
	return id, nil
}

// ClientOptions are the nats.go options of a connection with the credentials file
// at path: the credential itself and, for a tenant credential, its inbox prefix
// (without which every request and JetStream publish would wait for a reply the
// server may not deliver to it).
func ClientOptions(path string) ([]nats.Option, error) {
	id, err := InspectFile(path)
	if err != nil {
		return nil, err
	}
	opts := []nats.Option{nats.UserCredentials(path)}
	if id.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(id.InboxPrefix))
	}
	return opts, nil
}
