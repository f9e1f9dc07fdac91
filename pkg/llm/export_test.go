package llm

import (
	"context"
	"time"
)

// WithSleep returns cfg with its wait between retries replaced by sleep.
func WithSleep(cfg Config, sleep func(context.Context, time.Duration) error) Config {
	cfg.sleep = sleep
	return cfg
}
