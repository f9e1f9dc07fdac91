// Command consolidator runs agentmem's consolidator component on its own, for deployments that
// scale each component independently. See pkg/app and `consolidator --help`.
package main

import (
	"os"

	"github.com/agentmem/agentmem/pkg/app"
)

func main() {
	os.Exit(app.RunWorker(app.Consolidator, os.Args[1:], os.Stderr))
}
