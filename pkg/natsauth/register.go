package natsauth

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/agentmem/agentmem/events"
)

// ErrRevoke: a revocation that cannot be recorded or pushed to the server.
var ErrRevoke = errors.New("natsauth: revoke")

// registerFile is the register of issued and revoked credentials in Config.Dir:
// one JSON object a line, appended (a line is one write, so two processes
// issuing at once never interleave inside a line). It holds no secret.
const registerFile = "credentials.jsonl"

// entry is one line of the register: a credential issued, or (RevokedAt set) one
// revoked.
type entry struct {
	Key       string    `json:"key"`
	Tenant    string    `json:"tenant,omitempty"`
	Role      Role      `json:"role,omitempty"`
	Agent     string    `json:"agent,omitempty"`
	IssuedAt  time.Time `json:"issued_at,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// Credential is one issued credential as List reports it.
type Credential struct {
	Key    string
	Tenant string // "" for the service credential
	Role   Role
	// Agent is the agent an agent credential is bound to; "" when none.
	Agent    string
	IssuedAt time.Time
	// RevokedAt is when it was revoked; zero while it is valid.
	RevokedAt time.Time
}

func (a *Authority) record(e entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("%w: register: %w", ErrCreds, err)
	}
	path := filepath.Join(a.cfg.Dir, registerFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("%w: register %s: %w", ErrCreds, path, err)
	}
	_, werr := f.Write(append(line, '\n'))
	serr := f.Sync()
	if err := errors.Join(werr, serr, f.Close()); err != nil {
		return fmt.Errorf("%w: register %s: %w", ErrCreds, path, err)
	}
	return nil
}

// List returns the credentials issued with these keys, oldest first; tenant ""
// lists every one (the service's included), else only tenant's. A key revoked
// without having been issued here is listed with its revocation alone.
func (a *Authority) List(tenant string) ([]Credential, error) {
	entries, err := a.register()
	if err != nil {
		return nil, err
	}
	byKey := map[string]*Credential{}
	var order []string
	for _, e := range entries {
		c, ok := byKey[e.Key]
		if !ok {
			c = &Credential{Key: e.Key}
			byKey[e.Key] = c
			order = append(order, e.Key)
		}
		if e.Tenant != "" {
			c.Tenant = e.Tenant
		}
		if e.Role != "" {
			c.Role = e.Role
		}
		if e.Agent != "" {
			c.Agent = e.Agent
		}
		if !e.IssuedAt.IsZero() {
			c.IssuedAt = e.IssuedAt
		}
		if !e.RevokedAt.IsZero() {
			c.RevokedAt = e.RevokedAt
		}
	}
	out := make([]Credential, 0, len(order))
	for _, k := range order {
		if c := byKey[k]; tenant == "" || c.Tenant == tenant {
			out = append(out, *c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].IssuedAt.Before(out[j].IssuedAt) })
	return out, nil
}

// register reads every line of the register; a missing register is empty.
func (a *Authority) register() ([]entry, error) {
	path := filepath.Join(a.cfg.Dir, registerFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: register %s: %w", ErrCreds, path, err)
	}
	var out []entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || !nkeys.IsValidPublicUserKey(e.Key) {
			return nil, fmt.Errorf("%w: register %s line %d is not a credential record", ErrCreds, path, n)
		}
		out = append(out, e)
	}
	return out, nil
}

// Revoke records that the user key of tenant (tenant "": a service credential)
// is revoked from now on: every account JWT Trust signs from then on carries the
// revocation, so a server started (or updated, Push) with it refuses the
// credential and closes its connections. tenant must be the one the register has
// for key, so that an operator revoking for one tenant cannot cut off another's
// (or the service) by a typo; a tenant key the register does not know (issued
// elsewhere with these keys) is revoked as given, a service key only when the
// register knows it.
func (a *Authority) Revoke(tenant, key string) error {
	if !nkeys.IsValidPublicUserKey(key) {
		return fmt.Errorf("%w: %q is not a user public key (U…, 56 characters; `creds list` shows them)", ErrRevoke, key)
	}
	if tenant != "" {
		if err := events.ValidateID("tenant", tenant); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidTenant, err)
		}
	}
	creds, err := a.List("")
	if err != nil {
		return err
	}
	known := false
	for _, c := range creds {
		if c.Key != key {
			continue
		}
		if c.Tenant != tenant {
			return fmt.Errorf("%w: key %s is %s's credential, not %s's", ErrRevoke, key, describe(c), describe(Credential{Tenant: tenant}))
		}
		known = true
	}
	if tenant == "" && !known {
		return fmt.Errorf("%w: key %s is not a service credential of the register", ErrRevoke, key)
	}
	return a.record(entry{Key: key, Tenant: tenant, RevokedAt: time.Now().UTC()})
}

func describe(c Credential) string {
	if c.Tenant == "" {
		return "the service"
	}
	return "tenant " + c.Tenant
}

// revocations are the revoked keys of the register and when each was revoked.
func (a *Authority) revocations() (map[string]time.Time, error) {
	creds, err := a.List("")
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, c := range creds {
		if !c.RevokedAt.IsZero() {
			out[c.Key] = c.RevokedAt
		}
	}
	return out, nil
}

// Push sends the AGENTMEM account JWT Trust signs now (with every revocation) to
// the running server at url, as a user of the system account issued for this one
// call: the server applies it at once, refusing revoked credentials from then on
// and closing their connections, with no restart. It works with the embedded
// server of `agentmem up --auth` and with a nats-server run from `creds
// server-config` (memory resolver); a server restarted later needs the new trust
// (up --auth signs it at start; a config file needs `creds server-config` again).
func (a *Authority) Push(ctx context.Context, url string, opts ...nats.Option) error {
	trust, err := a.Trust()
	if err != nil {
		return err
	}
	sysUser, err := a.systemUser()
	if err != nil {
		return err
	}
	nc, err := nats.Connect(url, append([]nats.Option{nats.UserJWTAndSeed(sysUser.jwt, sysUser.seed), nats.Name("agentmem-creds")}, opts...)...)
	if err != nil {
		return fmt.Errorf("%w: connect to %s: %w", ErrRevoke, url, err)
	}
	defer nc.Close()
	msg, err := nc.RequestWithContext(ctx, "$SYS.REQ.ACCOUNT."+trust.Account+".CLAIMS.UPDATE", []byte(trust.AccountJWTs[trust.Account]))
	if err != nil {
		return fmt.Errorf("%w: update account on %s: %w", ErrRevoke, url, err)
	}
	var rep struct {
		Data *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"data"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return fmt.Errorf("%w: update account on %s: reply %q: %w", ErrRevoke, url, msg.Data, err)
	}
	if rep.Error != nil {
		return fmt.Errorf("%w: update account on %s: %s", ErrRevoke, url, rep.Error.Description)
	}
	return nil
}

// systemUserTTL bounds the system account user Push issues for itself.
const systemUserTTL = 5 * time.Minute

type userCreds struct{ jwt, seed string }

// systemUser issues a short-lived user of the SYS account, the only account whose
// users may update account JWTs on a running server.
func (a *Authority) systemUser() (userCreds, error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return userCreds{}, fmt.Errorf("%w: create system user: %w", ErrCreds, err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	uc := jwt.NewUserClaims(pub)
	uc.Name = "agentmem-creds"
	uc.Expires = time.Now().Add(systemUserTTL).Unix()
	token, err := uc.Encode(a.system)
	if err != nil {
		return userCreds{}, fmt.Errorf("%w: sign system user: %w", ErrCreds, err)
	}
	return userCreds{jwt: token, seed: string(seed)}, nil
}
