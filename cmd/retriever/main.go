// Command retriever runs agentmem's retriever component on its own, for deployments that
// scale each component independently. See pkg/app and `retriever --help`.
package main

import (
	"os"

	"github.com/agentmem/agentmem/pkg/app"
)

func main() {
	os.Exit(app.RunWorker(app.Retriever, os.Args[1:], os.Stderr))
}
