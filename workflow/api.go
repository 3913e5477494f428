package workflow

import (
	"strings"
)

// Role is one power over rflow's HTTP API that a scoped token may hold.
// Each route of the command API, the console and River UI needs exactly one
// (docs/operations.md, "Security model").
type Role string

// The roles of api: tokens:.
const (
	// RoleRead reads: workflows, runs, journals, approvals, River UI pages.
	RoleRead Role = "read"
	// RoleDeploy deploys workflow definitions (PUT /v1/workflows/{name}).
	RoleDeploy Role = "deploy"
	// RoleApprove approves and rejects approval gates.
	RoleApprove Role = "approve"
	// RoleOperate starts, retries and cancels runs, pauses and resumes
	// workflows, and acts on River UI's jobs and queues.
	RoleOperate Role = "operate"
)

// Roles lists every role, in the order the docs show them.
func Roles() []Role { return []Role{RoleRead, RoleDeploy, RoleApprove, RoleOperate} }

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool {
	for _, x := range Roles() {
		if r == x {
			return true
		}
	}
	return false
}

// FullAccessToken names the RFLOW_API_TOKEN credential: it holds every role,
// and an approval it decides is recorded as decided by this name.
const FullAccessToken = "RFLOW_API_TOKEN"

// APIToken is one scoped token of the project file's api: tokens:.
type APIToken struct {
	Pos   Position
	Name  string
	Token Secret
	Roles []Role
}

// apiConfig reads the project's api: block.
func (l *loader) apiConfig(n *node) {
	m := l.fields(n, "api", "tokens")
	if m == nil {
		return
	}
	names := map[string]Position{}
	values := map[string]string{}
	full, _ := l.lookupEnv(FullAccessToken)
	for _, tn := range l.list(m["tokens"], "api tokens", false) {
		t := l.apiToken(tn, names)
		if t == nil {
			continue
		}
		v := t.Token.Reveal()
		switch {
		case v == "":
		case v == full:
			l.errorf(keyPos(tn, "token"), "api token %s: its value is RFLOW_API_TOKEN's, which already holds every role; give it a token of its own", t.Name)
		case values[v] != "":
			l.errorf(keyPos(tn, "token"), "api token %s: its value is also token %s's; each token must be its own secret", t.Name, values[v])
		default:
			values[v] = t.Name
		}
		l.p.APITokens = append(l.p.APITokens, t)
	}
}

func (l *loader) apiToken(n *node, names map[string]Position) *APIToken {
	m := l.fields(n, "api token", "name", "token", "roles")
	if m == nil {
		return nil
	}
	t := &APIToken{Pos: n.pos}
	if nn := l.required(m, n, "name", "api token"); nn != nil {
		t.Name = l.str(nn, "api token name")
		switch first, dup := names[t.Name]; {
		case t.Name == "":
		case !namePattern.MatchString(t.Name):
			l.errorf(nn.pos, "api token name %q must start with a letter and hold only letters, digits, - and _", t.Name)
		case t.Name == FullAccessToken:
			l.errorf(nn.pos, "api token name %s is reserved for the full-access token", t.Name)
		case dup:
			l.errorf(nn.pos, "duplicate api token name %q (first at %s)", t.Name, first)
		default:
			names[t.Name] = nn.pos
		}
	}
	if tn := l.required(m, n, "token", "api token "+t.Name); tn != nil {
		t.Token = l.secretScalar(tn, "api token "+t.Name+": token")
		if t.Token.IsSet() && len(t.Token.Reveal()) < minTokenLen {
			l.errorf(tn.pos, "api token %s: the token is shorter than %d characters; use a random one (openssl rand -hex 32)", t.Name, minTokenLen)
		}
	}
	if rn := l.required(m, n, "roles", "api token "+t.Name); rn != nil {
		seen := map[Role]bool{}
		for _, item := range l.list(rn, "roles", true) {
			s, ok := l.scalar(item, "role")
			if !ok {
				continue
			}
			r := Role(s)
			if !r.Valid() {
				l.errorf(item.pos, "api token %s: unknown role %q (one of %s)%s", t.Name, s, roleList(), suggest(s, roleNames()))
				continue
			}
			if !seen[r] {
				seen[r] = true
				t.Roles = append(t.Roles, r)
			}
		}
		if len(t.Roles) == 0 && len(rn.items) == 0 && rn.kind == nodeSeq {
			l.errorf(rn.pos, "api token %s: roles is empty; give it at least one of %s", t.Name, roleList())
		}
	}
	return t
}

// minTokenLen is the shortest token api: tokens: accepts: a guessable token
// is no gate.
const minTokenLen = 16

func roleNames() []string {
	var out []string
	for _, r := range Roles() {
		out = append(out, string(r))
	}
	return out
}

func roleList() string { return strings.Join(roleNames(), ", ") }
