// Package redact hides credentials in URLs before they reach a log line, the
// step journal, an API reply or the terminal. It is the one redactor rflow
// has: every place that prints a URL, or an error that may embed one (a
// *url.Error repeats the whole request URL), goes through it.
//
// What is hidden:
//   - a password in the userinfo: user:pw@host becomes user:xxxxx@host;
//   - every query value: ?token=abc&v=2 becomes ?token=xxxxx&v=xxxxx, except
//     the database connection settings in safeQuery (sslmode=disable stays,
//     so the URL `rflow dev` prints still connects);
//   - a fragment: #access_token=… becomes #xxxxx;
//   - a path segment that looks like an API key (20 or more letters, digits,
//     dashes and underscores with a digit, and either a run of 20 letters
//     and digits or both upper and lower case), as node providers and chat
//     webhooks put keys in paths: /v3/<key> becomes /v3/xxxxx, while a
//     database name like rflow_test_17773f2f6cfb or a UUID stays;
//   - in a keyword/value database string, the password=… value.
//
// The scheme, host, port, user name, the other path segments and query keys
// stay, so a message still says which endpoint failed.
package redact

import (
	"regexp"
	"strings"
)

// Mask replaces each hidden part.
const Mask = "xxxxx"

// safeQuery are the query keys whose values are never secret: libpq
// connection settings a printed database URL needs to stay usable.
var safeQuery = map[string]bool{"sslmode": true, "connect_timeout": true, "application_name": true}

var (
	// urlInText finds URLs in free text: a scheme, "://", and everything up
	// to a space or a quote (url.Error quotes the URL it repeats).
	urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>` + "`" + `]+`)
	keyChars  = regexp.MustCompile(`^[A-Za-z0-9_\-]{20,}$`)
	keyRun    = regexp.MustCompile(`[A-Za-z0-9]{20}`)
	// dsnPassword is password=… in a libpq keyword/value string, quoted or not.
	dsnPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
)

// URL returns raw with its credentials masked (see the package comment). It
// never fails: text that is not a URL comes back with only a keyword/value
// password masked.
func URL(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return dsnPassword.ReplaceAllString(raw, "${1}"+Mask)
	}
	head, rest := raw[:i+3], raw[i+3:]
	// The userinfo ends at the last @ before the query: a password may hold
	// an unescaped / or @.
	start := 0
	if q := strings.IndexAny(rest, "?#"); q >= 0 {
		start = strings.LastIndex(rest[:q], "@") + 1
	} else {
		start = strings.LastIndex(rest, "@") + 1
	}
	end := len(rest)
	if j := strings.IndexAny(rest[start:], "/?#"); j >= 0 {
		end = start + j
	}
	authority, tail := rest[:end], rest[end:]
	if start > 0 {
		if user, _, hasPassword := strings.Cut(rest[:start-1], ":"); hasPassword {
			authority = user + ":" + Mask + rest[start-1:end]
		}
	}
	tail, fragment, hasFragment := strings.Cut(tail, "#")
	path, query, hasQuery := strings.Cut(tail, "?")
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(authority)
	b.WriteString(maskPath(path))
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(maskQuery(query))
	}
	if hasFragment {
		b.WriteByte('#')
		if fragment != "" {
			b.WriteString(Mask)
		}
	}
	return b.String()
}

func maskPath(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if keyLike(s) {
			segs[i] = Mask
		}
	}
	return strings.Join(segs, "/")
}

func keyLike(s string) bool {
	if !keyChars.MatchString(s) || !strings.ContainsAny(s, "0123456789") {
		return false
	}
	mixedCase := strings.ToLower(s) != s && strings.ToUpper(s) != s
	return mixedCase || keyRun.MatchString(s)
}

func maskQuery(query string) string {
	if query == "" {
		return ""
	}
	parts := strings.Split(query, "&")
	for i, p := range parts {
		key, value, ok := strings.Cut(p, "=")
		switch {
		case ok && value != "" && !safeQuery[strings.ToLower(key)]:
			parts[i] = key + "=" + Mask
		case !ok && p != "":
			parts[i] = Mask // ?<token> with no key
		}
	}
	return strings.Join(parts, "&")
}

// Text masks every URL found in s, and a keyword/value database password.
func Text(s string) string {
	s = urlInText.ReplaceAllStringFunc(s, func(m string) string {
		// Punctuation after a URL belongs to the sentence ("GET <url>: …").
		u := strings.TrimRight(m, ".,:;!?)]}")
		return URL(u) + m[len(u):]
	})
	return dsnPassword.ReplaceAllString(s, "${1}"+Mask)
}

// Error returns err with its message passed through Text; errors.Is and
// errors.As still see the original chain. Nil stays nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	msg := Text(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redacted{msg: msg, err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }
