package lifecycle

import (
	"embed"

	"github.com/agentmem/agentmem/pkg/llm"
)

//go:embed prompts
var promptFS embed.FS

var compressPrompt = llm.MustLoadPrompt(promptFS, "prompts", "compress")
