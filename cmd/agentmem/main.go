// Command agentmem is agentmem's command line: `up` runs everything in one process,
// `demo` shows the pipeline on a sample conversation, and the client commands speak
// the wire contract to a running agentmem (see `agentmem --help`).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "agentmem:", err)
		os.Exit(1)
	}
}
