package workflow

import (
	"fmt"
	"log/slog"
)

// Secret is a credential from the project file (a private key, a password,
// an HMAC key). Every way of printing it (fmt verbs, String, JSON) yields
// "***", so it cannot reach a log by accident; Reveal returns the value for
// the one place that needs it.
type Secret string

const redacted = "***"

// Reveal returns the secret's value. Call it only where the value is used,
// never to log or store it.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether the secret holds a value.
func (s Secret) IsSet() bool { return s != "" }

// String returns "***" (or "" for an empty secret).
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return fmt.Sprintf("workflow.Secret(%q)", s.String()) }

// Format makes every fmt verb (%s, %v, %q, %x, …) print the redacted form.
func (s Secret) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		fmt.Fprintf(f, "%q", s.String())
	default:
		fmt.Fprint(f, s.String())
	}
}

// MarshalJSON encodes the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf("%q", s.String())), nil }

// MarshalText encodes the redacted form (slog's text handler, YAML encoders).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue keeps slog handlers from logging the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
