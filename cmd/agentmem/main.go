// Command agentmem is agentmem's command line: `up` runs everything in one process,
// `demo` shows the pipeline on a sample conversation, and the client commands speak
// the wire contract to a running agentmem (see `agentmem --help`).
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	err := newRoot().Execute()
	var code exitCode
	if errors.As(err, &code) {
		os.Exit(int(code))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentmem:", err)
		os.Exit(1)
	}
}
