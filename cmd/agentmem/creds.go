package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spf13/cobra"

	"github.com/agentmem/agentmem/pkg/natsauth"
)

// newCredsCmd is `agentmem creds`: credentials for `agentmem up --auth` and for a
// NATS server configured with `creds server-config`. Nothing here needs a server.
func newCredsCmd(g *globalFlags) *cobra.Command {
	creds := &cobra.Command{
		Use:   "creds",
		Short: "Issue NATS credentials: one per tenant, and the workers' service credential",
	}
	var dataDir, tenant, out, role, agent string
	var service bool
	add := &cobra.Command{
		Use:   "add",
		Short: "Write a .creds file for a tenant's agent or admin (or, with --service, for workers and the retriever)",
		Long: `add signs a new NATS user with the signing keys under DIR/auth (created on first
use, mode 0600), records it in DIR/auth/credentials.jsonl (creds list) and writes its
credentials file (user JWT and nkey seed, mode 0600). A tenant's credential may
publish only mem.<tenant>.obs.> and mem.<tenant>.ended.>, request the endpoints of
its role on memrpc.<tenant>, and receive on its own inbox prefix, which clients read
from the file:
  --role agent (default)  observe, end sessions, context, search, topic, append, add,
                          get, update, history, sessions and items; the server
                          refuses forget, reset, delete, export/import, events,
                          policy set/rollback, backups restore, compress, consolidate
  --agent ID              with --role agent: also write agent ID's memory scope
                          (memrpc.<tenant>.agent.<ID>.append, .add, .item.save),
                          no other agent's; an agent credential without --agent
                          writes no agent scope at all
  --role admin            every endpoint of its tenant, every agent's scope
No server is needed: one running with these keys accepts the credential at once.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if service == (tenant != "") {
				return errors.New("give exactly one of --tenant and --service")
			}
			r, err := natsauth.ParseRole(role)
			if err != nil {
				return err
			}
			if service && role != "" {
				return errors.New("--role is for tenant credentials; --service is the whole account")
			}
			if agent != "" && r != natsauth.RoleAgent {
				return errors.New("--agent binds an agent credential to its agent's scope; an admin's writes every agent's")
			}
			a, err := authority(g, dataDir)
			if err != nil {
				return err
			}
			var data []byte
			if service {
				data, err = a.ServiceCreds()
			} else if agent != "" {
				data, err = a.AgentCreds(tenant, agent)
			} else {
				data, err = a.TenantCreds(tenant, r)
			}
			if err != nil {
				return err
			}
			if err := natsauth.WriteCreds(out, data); err != nil {
				return err
			}
			who := "the service"
			if tenant != "" {
				who = "tenant " + tenant + " (" + string(r) + ")"
				if agent != "" {
					who = "tenant " + tenant + " (" + string(r) + " " + agent + ")"
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote credentials for %s to %s (export AGENTMEM_NATS_CREDS_FILE=%s)\n", who, out, out)
			return nil
		},
	}
	af := add.Flags()
	af.StringVar(&dataDir, "data-dir", "", "the data directory of \"agentmem up --auth\" (default data_dir of the configuration); keys in DIR/auth")
	af.StringVar(&tenant, "tenant", "", "tenant id")
	af.BoolVar(&service, "service", false, "a credential for workers and the retriever: the whole account")
	af.StringVar(&role, "role", "", "agent (default) or admin: what the tenant's credential may request")
	af.StringVar(&agent, "agent", "", "bind the agent credential to this agent id: it may write that agent's memory scope (and no other's)")
	af.StringVar(&out, "out", "", "the .creds file to write (required)")
	_ = add.MarkFlagRequired("out")

	var confDir, confOut string
	serverConfig := &cobra.Command{
		Use:   "server-config",
		Short: "Print the nats-server configuration that trusts these credentials (operator, accounts; no secrets)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := authority(g, confDir)
			if err != nil {
				return err
			}
			trust, err := a.Trust()
			if err != nil {
				return err
			}
			if confOut == "" {
				_, err = fmt.Fprint(cmd.OutOrStdout(), trust.ServerConfig())
				return err
			}
			return os.WriteFile(confOut, []byte(trust.ServerConfig()), 0o644)
		},
	}
	serverConfig.Flags().StringVar(&confDir, "data-dir", "", "as for \"creds add\"")
	serverConfig.Flags().StringVar(&confOut, "out", "", "write it to this file instead of standard output")
	creds.AddCommand(add, serverConfig, newCredsListCmd(g), newCredsRevokeCmd(g))
	return creds
}

// newCredsListCmd is `agentmem creds list`: the register of issued credentials.
func newCredsListCmd(g *globalFlags) *cobra.Command {
	var dataDir, tenant string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the credentials issued with these keys: key, tenant, role, bound agent, issued at, revoked at",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := authority(g, dataDir)
			if err != nil {
				return err
			}
			creds, err := a.List(tenant)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KEY\tTENANT\tROLE\tAGENT\tISSUED AT\tREVOKED AT")
			for _, c := range creds {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Key, or(c.Tenant, "-"), or(string(c.Role), "-"), or(c.Agent, "-"), stamp(c.IssuedAt.UTC()), stamp(c.RevokedAt.UTC()))
			}
			return w.Flush()
		},
	}
	list.Flags().StringVar(&dataDir, "data-dir", "", "as for \"creds add\"")
	list.Flags().StringVar(&tenant, "tenant", "", "only this tenant's credentials")
	return list
}

// newCredsRevokeCmd is `agentmem creds revoke`: record the revocation, then push
// it to the running server so that it applies at once.
func newCredsRevokeCmd(g *globalFlags) *cobra.Command {
	var dataDir, tenant, key string
	var service bool
	revoke := &cobra.Command{
		Use:   "revoke",
		Short: "Revoke a credential: refused at its next connect, its connections closed now",
		Long: `revoke records the key as revoked in DIR/auth/credentials.jsonl and sends the
account, now revoking it, to the NATS server at --nats-url (nats.url) as a user of
the system account: the server closes the credential's connections and refuses it
from then on, without a restart. A server started later (up --auth) reads the
revocation from the register; a nats-server run from a config file needs
` + "`creds server-config`" + ` again in its Secret before its next restart.

--service instead of --tenant revokes a service credential (creds list shows it
with role service): the workers using it are cut off at once, and the next
` + "`up --auth`" + ` issues itself a new one.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if service == (tenant != "") {
				return errors.New("give --tenant T for a tenant's credential, or --service for the service's")
			}
			a, err := authority(g, dataDir)
			if err != nil {
				return err
			}
			if err := a.Revoke(tenant, key); err != nil {
				return err
			}
			cfg, _, err := loadConfig(g, map[string]string{})
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout()
			defer cancel()
			if err := a.Push(ctx, cfg.NATS.URL, nats.Timeout(5*time.Second)); err != nil {
				return fmt.Errorf("revoked %s in the register, but the running server still accepts it: %w (rerun when the server is reachable, or restart it with the new trust)", key, err)
			}
			owner := "the service"
			if tenant != "" {
				owner = "tenant " + tenant
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s of %s; the server at %s closed its connections\n", key, owner, cfg.NATS.URL)
			return nil
		},
	}
	f := revoke.Flags()
	f.StringVar(&dataDir, "data-dir", "", "as for \"creds add\"")
	f.StringVar(&tenant, "tenant", "", "the tenant the credential belongs to (or --service)")
	f.BoolVar(&service, "service", false, "revoke a service credential (the workers'), not a tenant's")
	f.StringVar(&key, "key", "", "the credential's user public key, as \"creds list\" shows it (required)")
	_ = revoke.MarkFlagRequired("key")
	return revoke
}

// authority loads (or creates) the signing keys of dataDir, or of data_dir of the
// configuration when dataDir is empty.
func authority(g *globalFlags, dataDir string) (*natsauth.Authority, error) {
	overrides := map[string]string{}
	if dataDir != "" {
		overrides["data_dir"] = dataDir
	}
	cfg, logger, err := loadConfig(g, overrides)
	if err != nil {
		return nil, err
	}
	return natsauth.New(natsauth.Config{Dir: natsauth.KeyDir(cfg.DataDir)}, logger)
}
