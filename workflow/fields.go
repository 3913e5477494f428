package workflow

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// loader holds the state of one Load (or ParseWorkflow / CompileSpec):
// the project being built and the diagnostics found so far.
type loader struct {
	diags
	p         *Project
	lookupEnv func(string) (string, bool)
	// origin is where the workflow definitions being compiled came from,
	// secrets the credential variables they must not read (envrefs.go),
	// and inDefinition is set while one is compiled.
	origin       Origin
	secrets      map[string]secretVar
	inDefinition bool
}

// fields checks that n is a mapping whose keys are all in allowed, and
// returns its values by key. what names the mapping in messages.
func (l *loader) fields(n *node, what string, allowed ...string) map[string]*node {
	if n == nil {
		return map[string]*node{}
	}
	if n.kind != nodeMap {
		if n.isNull() {
			return map[string]*node{}
		}
		l.errorf(n.pos, "%s must be a mapping, not %s", what, n.describe())
		return nil
	}
	out := make(map[string]*node, len(n.entries))
	for _, e := range n.entries {
		if !contains(allowed, e.key) {
			l.errorf(e.keyPos, "unknown key %q in %s%s", e.key, what, suggest(e.key, allowed))
			continue
		}
		out[e.key] = e.value
	}
	return out
}

// keyPos returns the position of key in mapping n, or n's position.
func keyPos(n *node, key string) Position {
	if n != nil {
		for _, e := range n.entries {
			if e.key == key {
				return e.keyPos
			}
		}
		return n.pos
	}
	return Position{}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// envRef matches ${VAR} and ${VAR:-default}: a default (shell and Compose
// syntax) lets one project file run under `rflow dev --project`, which
// sets the variable, and on its own.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// subst replaces ${VAR} references with environment values. A missing
// variable without a default is an error naming it, unless the project
// tolerates unset variables (ok is false either way); an empty one takes
// its default, as in the shell. Inside a workflow definition, a reference
// the definition may not read (envrefs.go) is an error naming it.
func (l *loader) subst(s string, pos Position) (string, bool) { return l.expand(s, pos, false) }

// expand is subst for a plain field, or for a field that holds a
// credential (secretField).
func (l *loader) expand(s string, pos Position, secretField bool) (string, bool) {
	if !strings.Contains(s, "${") {
		return s, true
	}
	ok := true
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := envRef.FindStringSubmatch(ref)
		name, def := m[1], m[2]
		if why := l.refused(name, secretField); why != "" {
			l.errorf(pos, "%s", why)
			ok = false
			return ""
		}
		v, found := l.lookupEnv(name)
		if l.inDefinition && !secretField && v != "" {
			if what := l.p.secretValueOf(v); what != "" {
				l.errorf(pos, "${%s} holds the value of %s, which can never be interpolated into a workflow", name, what)
				ok = false
				return ""
			}
		}
		if def != "" && v == "" {
			return def[len(":-"):]
		}
		if !found {
			if !l.p.allowUnsetEnv {
				l.errorf(pos, "environment variable %s is not set (referenced as ${%s})", name, name)
			}
			ok = false
		}
		return v
	})
	return out, ok
}

// secretScalar reads a field that holds a credential (a private key, a
// password, a token, a webhook or HMAC secret). Only here may ${VAR} name
// a secret variable; a value written literally is warned about, since it
// sits in the file for everyone who can read the file.
func (l *loader) secretScalar(n *node, what string) Secret {
	if n == nil || n.isNull() {
		return ""
	}
	if n.kind != nodeScalar {
		l.errorf(n.pos, "%s must be a single value, not %s", what, n.describe())
		return ""
	}
	s, isStr := n.val.(string)
	if !isStr {
		s = scalarText(n.val)
	}
	if s != "" && !envRef.MatchString(s) {
		l.warnf(n.pos, "%s is written literally; put it in an environment variable and write ${VAR} here, so the secret stays out of the file", what)
		return Secret(s)
	}
	v, _ := l.expand(s, n.pos, true)
	return Secret(v)
}

// scalar returns n's text after ${VAR} substitution; ok is false (with an
// error reported) when n is not a scalar.
func (l *loader) scalar(n *node, what string) (string, bool) {
	if n == nil || n.isNull() {
		return "", false
	}
	if n.kind != nodeScalar {
		l.errorf(n.pos, "%s must be a single value, not %s", what, n.describe())
		return "", false
	}
	if s, isStr := n.val.(string); isStr {
		return l.subst(s, n.pos)
	}
	return scalarText(n.val), true
}

// str returns a required string.
func (l *loader) str(n *node, what string) string {
	s, _ := l.scalar(n, what)
	return s
}

// required reports an error when key is missing from m.
func (l *loader) required(m map[string]*node, parent *node, key, what string) *node {
	n := m[key]
	if n.isNull() {
		l.errorf(parent.pos, "%s: missing required key %q", what, key)
		return nil
	}
	return n
}

// integer returns n as an integer in [lo, hi].
func (l *loader) integer(n *node, what string, lo, hi int64) (int64, bool) {
	s, ok := l.scalar(n, what)
	if !ok {
		return 0, false
	}
	if f, isFloat := n.val.(float64); isFloat && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		s = strconv.FormatInt(int64(f), 10)
	}
	b, err := parseInteger(s)
	if err != nil || !b.IsInt64() {
		l.errorf(n.pos, "%s must be an integer, not %q", what, s)
		return 0, false
	}
	i := b.Int64()
	if i < lo || i > hi {
		if hi == math.MaxInt64 {
			l.errorf(n.pos, "%s must be at least %d, not %d", what, lo, i)
		} else {
			l.errorf(n.pos, "%s must be between %d and %d, not %d", what, lo, hi, i)
		}
		return 0, false
	}
	return i, true
}

// bigInteger returns n as a non-negative integer of any size.
func (l *loader) bigInteger(n *node, what string) (*big.Int, bool) {
	if b, ok := n.val.(*big.Int); ok && n.kind == nodeScalar {
		return new(big.Int).Set(b), true
	}
	s, ok := l.scalar(n, what)
	if !ok {
		return nil, false
	}
	b, err := parseInteger(s)
	if err != nil || b.Sign() < 0 {
		l.errorf(n.pos, "%s must be a non-negative integer, not %q", what, s)
		return nil, false
	}
	return b, true
}

func (l *loader) boolean(n *node, what string) (bool, bool) {
	if n == nil || n.isNull() {
		return false, false
	}
	if b, ok := n.val.(bool); ok && n.kind == nodeScalar {
		return b, true
	}
	s, ok := l.scalar(n, what)
	if !ok {
		return false, false
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off":
		return false, true
	}
	l.errorf(n.pos, "%s must be true or false, not %q", what, s)
	return false, false
}

// ParseDuration parses a duration as project files write them: Go
// durations ("10s", "1h30m") plus whole days ("7d").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" {
		n, err := strconv.ParseInt(days, 10, 32)
		if err == nil && n >= 0 && n <= 36500 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (use e.g. 30s, 10m, 1h30m, 7d)", s)
	}
	return d, nil
}

// duration returns n as a positive duration.
func (l *loader) duration(n *node, what string) (time.Duration, bool) {
	s, ok := l.scalar(n, what)
	if !ok {
		return 0, false
	}
	if _, isInt := n.val.(int64); isInt {
		l.errorf(n.pos, "%s: %s has no unit (write e.g. %ss)", what, s, s)
		return 0, false
	}
	d, err := ParseDuration(s)
	if err != nil {
		l.errorf(n.pos, "%s: %v", what, err)
		return 0, false
	}
	if d <= 0 {
		l.errorf(n.pos, "%s must be positive, not %s", what, s)
		return 0, false
	}
	return d, true
}

// list returns the items of n, accepting a single value as a list of one
// when single is true.
func (l *loader) list(n *node, what string, single bool) []*node {
	if n == nil || n.isNull() {
		return nil
	}
	if n.kind == nodeSeq {
		return n.items
	}
	if single && n.kind == nodeScalar {
		return []*node{n}
	}
	l.errorf(n.pos, "%s must be a list, not %s", what, n.describe())
	return nil
}

// oneOf checks that n is one of the allowed words.
func (l *loader) oneOf(n *node, what string, allowed ...string) (string, bool) {
	s, ok := l.scalar(n, what)
	if !ok {
		return "", false
	}
	if !contains(allowed, s) {
		l.errorf(n.pos, "%s must be one of %s, not %q%s", what, strings.Join(allowed, ", "), s, suggest(s, allowed))
		return "", false
	}
	return s, true
}

var namePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,99}$`)
var idPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,99}$`)

// ValidProjectName reports whether name is a name: rflow.yaml accepts for a
// project (so it is safe as a folder name, say).
func ValidProjectName(name string) bool { return namePattern.MatchString(name) }
