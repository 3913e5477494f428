package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/rflow-dev/rflow/server/access"
	"github.com/rflow-dev/rflow/workflow"
)

// requireRole guards an endpoint of the command API: the request must
// carry an API token (or, from the run console in process, its session's
// principal) that holds role. Without any configured token the API is off
// (503), so a forgotten RFLOW_API_TOKEN can never leave it open; no or a
// wrong token is 401; a token without role is 403 naming the role.
func (s *Server) requireRole(role workflow.Role, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.keyring.Enabled() {
			writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "api_disabled",
				message: "the command API is disabled: start rflow with RFLOW_API_TOKEN set (or api: tokens: in the project file) to enable it"})
			return
		}
		p, ok := access.FromContext(r.Context())
		if !ok {
			p, ok = s.bearer(r)
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rflow"`)
			writeError(w, &apiError{status: http.StatusUnauthorized, code: "unauthorized",
				message: "missing or wrong bearer token: send Authorization: Bearer <token> (RFLOW_API_TOKEN or one of api: tokens:)"})
			return
		}
		if !p.Has(role) {
			writeError(w, forbidden(p, role))
			return
		}
		next.ServeHTTP(w, r.WithContext(access.WithPrincipal(r.Context(), p)))
	})
}

// bearer is the principal of the request's Authorization: Bearer token.
func (s *Server) bearer(r *http.Request) (access.Principal, bool) {
	token, ok := access.BearerToken(r)
	if !ok {
		return access.Principal{}, false
	}
	return s.keyring.Lookup(token)
}

// forbidden is the 403 of a token that lacks role.
func forbidden(p access.Principal, role workflow.Role) *apiError {
	return &apiError{status: http.StatusForbidden, code: "forbidden",
		message: fmt.Sprintf("this request needs the %s role; token %s holds %s", role, p.Name, p.RoleList()),
		details: map[string]any{"required_role": role, "token": p.Name, "roles": p.Roles}}
}

// principal is who the guarded request acts as (requireRole put it there).
func principal(r *http.Request) access.Principal {
	p, _ := access.FromContext(r.Context())
	return p
}

// readBody reads the whole body up to the server's limit: 413 beyond it.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.bodyLimit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, code: "body_too_large",
			message: fmt.Sprintf("the request body is over the limit of %d bytes", s.bodyLimit)}
	}
	if err != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "bad_body",
			message: "could not read the request body"}
	}
	return body, nil
}
