// Package access decides who an HTTP request to rflow acts as and what it
// may do: the API tokens and their roles (RFLOW_API_TOKEN holds every role;
// the project's api: tokens: hold theirs), the Bearer credential, the
// client behind a trusted proxy, and the console login's throttle. The
// command API, the run console and River UI share it, so one token means
// the same everywhere.
package access

import (
	"context"
	"slices"
	"strings"

	"github.com/rflow-dev/rflow/workflow"
)

// Principal is who a request acts as: a token's name and its roles.
type Principal struct {
	// Name is the token's name (workflow.FullAccessToken for
	// RFLOW_API_TOKEN): what an approval records as its decider.
	Name  string
	Roles []workflow.Role
}

// Has reports whether p holds role.
func (p Principal) Has(role workflow.Role) bool { return slices.Contains(p.Roles, role) }

// RoleList is p's roles for messages: "read, deploy" (or "none").
func (p Principal) RoleList() string {
	if len(p.Roles) == 0 {
		return "none"
	}
	names := make([]string, len(p.Roles))
	for i, r := range p.Roles {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p. The run console sends its commands
// to the API's handler in process under its session's principal; nothing
// from the network can set a context value, so this is no way in.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal WithPrincipal put in ctx.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
