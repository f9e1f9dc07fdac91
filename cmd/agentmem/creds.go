package main

import (
	"errors"
	"fmt"
	"os"

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
	var dataDir, tenant, out string
	var service bool
	add := &cobra.Command{
		Use:   "add",
		Short: "Write a .creds file for a tenant (or, with --service, for workers and the retriever)",
		Long: `add signs a new NATS user with the signing keys under DIR/auth (created on first
use, mode 0600) and writes its credentials file (user JWT and nkey seed, mode 0600).
A tenant's credential may publish only mem.<tenant>.obs.> and mem.<tenant>.ended.>,
request memrpc.<tenant>.>, and receive on its own inbox prefix, which clients read
from the file. No server is needed: one running with these keys accepts the
credential at once.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if service == (tenant != "") {
				return errors.New("give exactly one of --tenant and --service")
			}
			a, err := authority(g, dataDir)
			if err != nil {
				return err
			}
			var data []byte
			if service {
				data, err = a.ServiceCreds()
			} else {
				data, err = a.TenantCreds(tenant)
			}
			if err != nil {
				return err
			}
			if err := natsauth.WriteCreds(out, data); err != nil {
				return err
			}
			who := "the service"
			if tenant != "" {
				who = "tenant " + tenant
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote credentials for %s to %s (export AGENTMEM_NATS_CREDS_FILE=%s)\n", who, out, out)
			return nil
		},
	}
	af := add.Flags()
	af.StringVar(&dataDir, "data-dir", "", "the data directory of \"agentmem up --auth\" (default data_dir of the configuration); keys in DIR/auth")
	af.StringVar(&tenant, "tenant", "", "tenant id")
	af.BoolVar(&service, "service", false, "a credential for workers and the retriever: the whole account")
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
	creds.AddCommand(add, serverConfig)
	return creds
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
