package server

import (
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
	var req reasonRequest
	if aerr := decodeBody(body, &req, `empty or a JSON object {"reason": "…"}`); aerr != nil {
		return "", aerr
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
