// Command agentmem is agentmem's command line: `up` runs everything in one process,
// `demo` shows the pipeline on a sample conversation, and the client commands speak
// the wire contract to a running agentmem (see `agentmem --help`).
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

func main() {
	err := newRoot().Execute()
	var code exitCode
	if errors.As(err, &code) {
		os.Exit(int(code))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine is err as the command line reports it, prefixed with the program's
// name unless the error already starts with it (the client's "agentmem search:
// 400 …").
func errorLine(err error) string {
	if msg := err.Error(); strings.HasPrefix(msg, "agentmem ") {
		return msg
	}
	return "agentmem: " + err.Error()
}
