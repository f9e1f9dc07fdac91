// Command ingest runs agentmem's ingest component on its own, for deployments that
// scale each component independently. See pkg/app and `ingest --help`.
package main

import (
	"os"

	"github.com/agentmem/agentmem/pkg/app"
)

func main() {
	os.Exit(app.RunWorker(app.Ingest, os.Args[1:], os.Stderr))
}
