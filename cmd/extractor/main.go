// Command extractor runs agentmem's extractor component on its own, for deployments that
// scale each component independently. See pkg/app and `extractor --help`.
package main

import (
	"os"

	"github.com/agentmem/agentmem/pkg/app"
)

func main() {
	os.Exit(app.RunWorker(app.Extractor, os.Args[1:], os.Stderr))
}
