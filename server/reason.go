package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/rflow-dev/rflow/store"
)

// reasonRequest is the optional body of POST /v1/runs/{id}/cancel and
// POST /v1/workflows/{name}/pause: why, as `--reason` says it on the CLI.
type reasonRequest struct {
	Reason *string `json:"reason"`
}

// readReason returns the reason of a cancel or pause body ("" for an empty
// body, {} or a null reason). Anything else that is not {"reason": "…"}
// with at most store.MaxReasonLen characters is a 400 naming the problem:
// a misspelt field is refused rather than dropped, so a reason never
// vanishes silently.
func readReason(body []byte) (string, *apiError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", nil
	}
	var req reasonRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		return "", &apiError{status: http.StatusBadRequest, code: "malformed_json",
			message: fmt.Sprintf("the body must be empty or a JSON object {\"reason\": \"…\"}: %v", orTrailing(err))}
	}
	if req.Reason == nil {
		return "", nil
	}
	reason, err := store.CleanReason(*req.Reason)
	if err != nil {
		return "", &apiError{status: http.StatusBadRequest, code: "reason_too_long", message: err.Error()}
	}
	return reason, nil
}
