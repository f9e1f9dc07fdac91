package redact

import (
	"strings"
	"testing"
)

// The generic rule: a value after "token", "secret", "api key", "client_secret"
// and the like with any of its separators (":", "=", "：", "是", "is") is a
// secret, and the words around it stay.
func TestGenericSecretRuleSeparators(t *testing.T) {
	const value = "q7Vx2Lm9Rt4Wz8Kp"
	for _, in := range []string{
		"token: " + value,
		"token:" + value,
		"TOKEN = " + value,
		"the secret is: " + value,
		"api_key=" + value,
		"client-secret：" + value,
		"access_key: '" + value + "'",
		"令牌 token是 " + value,
	} {
		got, found := Text("deploy with " + in + " tonight")
		if !found || strings.Contains(got, value) || !strings.Contains(got, Marker("secret")) || !strings.HasPrefix(got, "deploy with ") || !strings.HasSuffix(got, " tonight") {
			t.Errorf("Text(%q) = %q, %v; want the value replaced by %s and the rest kept", in, got, found, Marker("secret"))
		}
	}
	// Without a separator, or with a value too short to be a key, it is prose.
	for _, in := range []string{"the token expired yesterday afternoon", "token: short1"} {
		if got, found := Text(in); found || got != in {
			t.Errorf("Text(%q) = %q, %v; want it unchanged", in, got, found)
		}
	}
}
