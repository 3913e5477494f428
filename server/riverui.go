package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"

	"github.com/rflow-dev/rflow/server/console"
	"github.com/rflow-dev/rflow/workflow"
)

// riverUIPrefix is where River UI (its pages and its /api) is mounted.
const riverUIPrefix = console.RiverUIPrefix

// newRiverUI builds River UI over the engine's River client: its job
// lists show rflow's step, relayer and maintenance jobs. Its background
// services (count caches) run from Serve, with the server's context.
func (s *Server) newRiverUI(client *river.Client[pgx.Tx]) (*riverui.Handler, error) {
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		Logger:    s.logger.With("component", "riverui"),
		Prefix:    riverUIPrefix,
	})
	if err != nil {
		return nil, fmt.Errorf("server: river ui: %w", err)
	}
	return h, nil
}

// mountRiverUI serves River UI at /riverui/ behind the API tokens and the
// console's session (riverUIAccess).
func (s *Server) mountRiverUI(h http.Handler) {
	guarded := s.riverUIAccess(h)
	s.mux.Handle(riverUIPrefix+"/", guarded)
	s.mux.Handle(riverUIPrefix, guarded)
}

// riverUIAccess lets a request into River UI when it carries a token or a
// console session whose roles allow it: read for its pages and the API
// calls that only read, operate for the ones that act (cancel, retry or
// delete jobs, pause queues). A request on the session cookie that acts
// must come from River UI's own origin, by the same rule as the console's
// forms (http.CrossOriginProtection), and must say where it comes from
// (Origin or Sec-Fetch-Site): River UI's calls cannot carry the console's
// CSRF token, so a browser that sends neither header is refused. A browser
// without a session is sent to the console's login, which returns here.
func (s *Server) riverUIAccess(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusForbidden, code: "cross_origin",
			message: "cross-origin request refused: River UI acts only on requests from its own pages"})
	}))
	sameOrigin := cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.keyring.Enabled() {
			writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "api_disabled",
				message: "River UI is disabled: start rflow with RFLOW_API_TOKEN set (or api: tokens: in the project file) to enable it"})
			return
		}
		role := workflow.RoleOperate
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			role = workflow.RoleRead
		}
		if p, ok := s.bearer(r); ok {
			if !p.Has(role) {
				writeError(w, forbidden(p, role))
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		p, ok := s.console.Session(r)
		switch {
		case !ok && r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, riverUIPrefix+"/api/"):
			http.Redirect(w, r, console.Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		case !ok:
			w.Header().Set("WWW-Authenticate", `Bearer realm="rflow"`)
			writeError(w, &apiError{status: http.StatusUnauthorized, code: "unauthorized",
				message: "River UI needs a console session (log in at /ui/login) or Authorization: Bearer <token>"})
		case !p.Has(role):
			writeError(w, forbidden(p, role))
		case role != workflow.RoleRead && r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == "":
			writeError(w, &apiError{status: http.StatusForbidden, code: "cross_origin",
				message: "a request on the console's session that acts must say its origin (Origin or Sec-Fetch-Site)"})
		default:
			sameOrigin.ServeHTTP(w, r)
		}
	})
}

// startRiverUI starts River UI's background services until ctx ends.
func (s *Server) startRiverUI(ctx context.Context) error {
	if s.riverUI == nil {
		return nil
	}
	if err := s.riverUI.Start(ctx); err != nil {
		return fmt.Errorf("start river ui: %w", err)
	}
	return nil
}
