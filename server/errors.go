package server

import (
	"encoding/json"
	"net/http"
)

// apiError is an error with its HTTP answer. Handlers return it; writeError
// renders it as {"error":{"code":…,"message":…[,"details":…]}}.
type apiError struct {
	status  int
	code    string
	message string
	details any
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// errInternal hides the cause (logged, never sent: it may name tables,
// hosts or values the caller has no business seeing).
var errInternal = &apiError{status: http.StatusInternalServerError, code: "internal",
	message: "internal error; the request changed nothing, retry it with the same Idempotency-Key"}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

func errorJSON(e *apiError) []byte {
	b, err := json.Marshal(errorBody{Error: errorDetail{Code: e.code, Message: e.message, Details: e.details}})
	if err != nil {
		// Details are built from plain values; this cannot happen.
		return []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	return b
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeRaw(w, e.status, errorJSON(e))
}

// writeJSON encodes v; v is always one of our response types.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, errInternal)
		return
	}
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
