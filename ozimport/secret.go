package ozimport

import (
	"fmt"
	"regexp"
	"strings"
)

// SecretValue is Monitor's secret reference: {"type": "plain" |
// "environment" | "hashicorpcloudvault", "value": …} (type case-insensitive).
type SecretValue struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// secretKind is where a secret's value lives.
type secretKind int

const (
	secretPlain secretKind = iota
	secretEnv
	secretVault
)

func (s SecretValue) kind() (secretKind, error) {
	switch strings.ToLower(s.Type) {
	case "plain":
		return secretPlain, nil
	case "environment":
		return secretEnv, nil
	case "hashicorpcloudvault":
		return secretVault, nil
	}
	return 0, fmt.Errorf("type %q: want plain, environment or hashicorpcloudvault", s.Type)
}

var nonEnvChar = regexp.MustCompile(`[^A-Z0-9_]+`)

// envName makes an environment variable name out of s.
func envName(s string) string {
	n := strings.Trim(nonEnvChar.ReplaceAllString(strings.ToUpper(s), "_"), "_")
	if n == "" || isDigit(n[0]) {
		n = "V_" + n
	}
	return n
}
