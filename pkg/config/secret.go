package config

import (
	"fmt"
	"os"
	"strings"
)

// Secret is a credential held in the configuration. Every way of printing it (fmt, JSON,
// YAML, zap's reflection) shows "[REDACTED]", so a logged or dumped Config never leaks
// it; Reveal is the one explicit way to read it.
type Secret string

const redacted = "[REDACTED]"

// String hides a non-empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString hides the secret from %#v.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// MarshalText hides the secret from encoding/json, YAML and every other text encoder.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Reveal returns the secret itself.
func (s Secret) Reveal() string { return string(s) }

// resolveSecret returns the inline value or the trimmed content of the file; "" when
// neither is set.
func resolveSecret(valueKey string, value Secret, fileKey, path string) (string, error) {
	switch {
	case value != "" && path != "":
		return "", fmt.Errorf("%w: %s and %s are both set", ErrSecret, valueKey, fileKey)
	case path == "":
		return value.Reveal(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrSecret, fileKey, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%w: %s: file %s is empty", ErrSecret, fileKey, path)
	}
	return s, nil
}

// APIKeyValue returns llm.api_key, or the content of llm.api_key_file.
func (l LLM) APIKeyValue() (string, error) {
	return resolveSecret("llm.api_key", l.APIKey, "llm.api_key_file", l.APIKeyFile)
}

// APIKeyValue returns embed.api_key, or the content of embed.api_key_file.
func (e Embed) APIKeyValue() (string, error) {
	return resolveSecret("embed.api_key", e.APIKey, "embed.api_key_file", e.APIKeyFile)
}

// APIKeyValue returns vector.qdrant.api_key, or the content of vector.qdrant.api_key_file.
func (q Qdrant) APIKeyValue() (string, error) {
	return resolveSecret("vector.qdrant.api_key", q.APIKey, "vector.qdrant.api_key_file", q.APIKeyFile)
}

// PasswordValue returns nats.password, or the content of nats.password_file.
func (n NATS) PasswordValue() (string, error) {
	return resolveSecret("nats.password", n.Password, "nats.password_file", n.PasswordFile)
}

// TokenValue returns the content of nats.token_file ("" when unset). Tokens are only
// read from files, so that none sits in a config file or a process environment.
func (n NATS) TokenValue() (string, error) {
	return resolveSecret("nats.token", "", "nats.token_file", n.TokenFile)
}

// UIPasswordValue returns the content of http.ui_password_file ("" when unset).
func (h HTTP) UIPasswordValue() (string, error) {
	return resolveSecret("http.ui_password", "", "http.ui_password_file", h.UIPasswordFile)
}
