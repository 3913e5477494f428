package workflow

import (
	"regexp"
	"slices"
	"strings"
)

// A workflow sees only the environment variables the project declares
// under env: in its project file, as env.NAME. Workflows can be deployed
// through the API by anyone holding its token; without the allowlist they
// could read (and send out) every secret the process holds. ${VAR}
// substitution happens at load time, in the project owner's files, and is
// not affected.

// envNamePattern is the form of a variable name env: accepts.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// hiddenEnv are variables no workflow may read, declared or not: they
// unlock the database and the command API.
var hiddenEnv = map[string]string{
	"DATABASE_URL":    "it holds the database URL and its credentials",
	"RFLOW_API_TOKEN": "it is the command API's token",
}

// envAllowlist reads the project's env: list. secretRefs names the
// variables the project file uses for its own secrets (the database URL,
// wallet keys and passwords), with why each is secret; declaring one is an
// error, and so is declaring a variable whose value is a wallet's key. A
// declared variable that is not set is an error too, as with ${VAR}: a
// workflow reading it would otherwise get "" and fail far from the cause.
func (l *loader) envAllowlist(n *node, secretRefs map[string]string) {
	seen := map[string]Position{}
	for _, item := range l.list(n, "env", false) {
		if item.kind != nodeScalar {
			l.errorf(item.pos, "env: each entry is a variable name, not %s", item.describe())
			continue
		}
		name, isStr := item.val.(string)
		if !isStr || !envNamePattern.MatchString(name) {
			l.errorf(item.pos, "env: %q is not an environment variable name (letters, digits and _, not starting with a digit)", scalarText(item.val))
			continue
		}
		if first, dup := seen[name]; dup {
			l.errorf(item.pos, "env: %s is declared twice (first at %s)", name, first)
			continue
		}
		seen[name] = item.pos
		if why, ok := hiddenEnv[name]; ok {
			l.errorf(item.pos, "env: %s is never visible to workflows (%s); remove it from env:", name, why)
			continue
		}
		if why, ok := secretRefs[name]; ok {
			l.errorf(item.pos, "env: %s is never visible to workflows (it holds %s); remove it from env:", name, why)
			continue
		}
		v, found := l.lookupEnv(name)
		if !found {
			if !l.p.allowUnsetEnv {
				l.errorf(item.pos, "env: environment variable %s is not set (declared under env:); set it, or remove it from env:", name)
			}
			// Still declared: its uses are not errors of their own. The
			// project fails to load, so nothing runs without it.
			l.p.Env = append(l.p.Env, name)
			continue
		}
		if w := l.walletHolding(v); w != "" {
			l.errorf(item.pos, "env: %s is never visible to workflows (it holds wallet %s's secret); remove it from env:", name, w)
			continue
		}
		if what := l.p.secretValueOf(v); what != "" {
			l.errorf(item.pos, "env: %s is never visible to workflows (it holds the value of %s); remove it from env:", name, what)
			continue
		}
		l.p.Env = append(l.p.Env, name)
	}
	slices.Sort(l.p.Env)
}

// walletHolding returns the name of a wallet whose private key or
// password is v (with or without 0x), or "".
func (l *loader) walletHolding(v string) string {
	if v == "" {
		return ""
	}
	bare := strings.TrimPrefix(strings.TrimPrefix(v, "0x"), "0X")
	for _, w := range l.p.Wallets {
		for _, s := range []string{w.PrivateKey.Reveal(), w.Password.Reveal()} {
			if s != "" && (s == v || strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X") == bare) {
				return w.Name
			}
		}
	}
	return ""
}

// envRefsIn adds the ${VAR} names used in the scalar n to refs, as what.
func envRefsIn(n *node, what string, refs map[string]string) {
	if n == nil || n.kind != nodeScalar {
		return
	}
	s, ok := n.val.(string)
	if !ok {
		return
	}
	for _, m := range envRef.FindAllStringSubmatch(s, -1) {
		refs[m[1]] = what
	}
}

// envType is the env variable as expressions see it: exactly the declared
// names, each a string. Reading any other name is a load-time error.
func (p *Project) envType() *typ {
	fields := map[string]*typ{}
	for _, name := range p.Env {
		fields[name] = stringT
	}
	t := objectT("env", fields)
	t.unknownField = "env.%s is not declared in " + strings.ReplaceAll(p.fileName(), "%", "%%") + " env:; add it to expose it"
	return t
}

func (p *Project) fileName() string {
	if p.file == "" {
		return "rflow.yaml"
	}
	return p.file
}
