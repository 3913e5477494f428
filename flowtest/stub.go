package flowtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/flowtest/fixture"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/workflow"
)

// recorder is what one test's runs did outside Postgres: every HTTP
// request (answered from the test's stubs) and every send (captured before
// any relayer). Requests that match no stub are answered 404 and reported.
type recorder struct {
	stubs []fixture.Stub

	mu       sync.Mutex
	used     []int
	requests []any
	sends    []any
	unmocked []string
}

// router hands each request and send of a session's engine to the test
// that owns its run. A request carries its run in X-Rflow-Run-Id (every
// http_call and notify sets it).
type router struct {
	mu   sync.Mutex
	runs map[uuid.UUID]*recorder
}

func newRouter() *router { return &router{runs: map[uuid.UUID]*recorder{}} }

func (r *router) own(run uuid.UUID, rec *recorder) {
	r.mu.Lock()
	r.runs[run] = rec
	r.mu.Unlock()
}

func (r *router) forget(run uuid.UUID) {
	r.mu.Lock()
	delete(r.runs, run)
	r.mu.Unlock()
}

func (r *router) owner(run uuid.UUID) *recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[run]
}

// RoundTrip answers a step's request from its test's stubs; nothing leaves
// the process.
func (r *router) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	id, _ := uuid.Parse(req.Header.Get("X-Rflow-Run-Id"))
	rec := r.owner(id)
	if rec == nil {
		return respond(req, http.StatusNotFound, nil, "rflow test: a request of no test's run"), nil
	}
	return rec.answer(req, body), nil
}

func (rec *recorder) answer(req *http.Request, body []byte) *http.Response {
	headers := map[string]any{}
	for k, vs := range req.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	url := req.URL.String()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.requests = append(rec.requests, map[string]any{
		"method": req.Method, "url": url, "headers": headers, "body": decodeBody(req.Header.Get("Content-Type"), body),
	})
	if rec.used == nil {
		rec.used = make([]int, len(rec.stubs))
	}
	// The first matching stub not yet used answers; once each matching
	// stub has answered, the last one repeats (so a list of stubs for one
	// URL is a sequence: a 500, then a 200, say).
	pick := -1
	for i, s := range rec.stubs {
		if (s.Method == "" || s.Method == req.Method) && (s.URL == "" || s.URL == url) {
			pick = i
			if rec.used[i] == 0 {
				break
			}
		}
	}
	if pick < 0 {
		rec.unmocked = append(rec.unmocked, req.Method+" "+url)
		return respond(req, http.StatusNotFound, nil, "rflow test: no stub for "+req.Method+" "+url)
	}
	rec.used[pick]++
	s := rec.stubs[pick]
	var raw []byte
	ctype := "application/json"
	switch b := s.Body.(type) {
	case nil:
	case string:
		raw, ctype = []byte(b), "text/plain; charset=utf-8"
	default:
		raw, _ = json.Marshal(b) // plain data from YAML always encodes
	}
	h := http.Header{}
	if len(raw) > 0 {
		h.Set("Content-Type", ctype)
	}
	for k, v := range s.Headers {
		h.Set(k, v)
	}
	return respond(req, s.Status, h, string(raw))
}

func respond(req *http.Request, status int, h http.Header, body string) *http.Response {
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

// decodeBody is a request body as a test states it: JSON as data, other
// text as a string.
func decodeBody(ctype string, b []byte) any {
	if len(b) == 0 {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		if v, err := plainJSON(b); err == nil {
			return v
		}
	}
	return string(b)
}

// plainJSON decodes JSON with exact numbers (json.Number), as fixture
// values are.
func plainJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// send records a captured send and answers as a confirmed transaction
// would: the step's output has the relayer's fields, with a hash made from
// the send's idempotency key, and "test": true.
func (r *router) send(_ context.Context, s jobs.SendCapture) (map[string]any, error) {
	rec := r.owner(s.RunID)
	if rec == nil {
		return nil, fmt.Errorf("a send of no test's run")
	}
	req := s.Request
	value := "0"
	if req.Value != nil {
		value = req.Value.String()
	}
	got := map[string]any{
		"wallet": req.Wallet, "network": s.Step.Send.Network, "chain_id": json.Number(fmt.Sprint(req.ChainID)),
		"to": req.To.Hex(), "value": json.Number(value), "data": hexutil.Encode(req.Data),
	}
	if m := s.Step.Send.ABIMethod; m != nil && len(req.Data) >= 4 {
		got["function"] = m.Name
		vals, err := m.Inputs.Unpack(req.Data[4:])
		if err != nil {
			return nil, fmt.Errorf("decode the calldata of %s: %w", m.Name, err)
		}
		args, err := asPlain(vals)
		if err != nil {
			return nil, err
		}
		got["args"] = args
	}
	rec.mu.Lock()
	rec.sends = append(rec.sends, got)
	rec.mu.Unlock()
	hash := crypto.Keccak256Hash([]byte(req.ExternalID))
	return map[string]any{
		"tx_id": uuid.NewSHA1(uuid.NameSpaceOID, []byte(req.ExternalID)).String(), "external_id": req.ExternalID,
		"hash": hash.Hex(), "block": int64(0), "block_hash": common.Hash{}.Hex(), "status": "confirmed", "gas_used": int64(0), "from": "",
		"to": req.To.Hex(), "value": value, "dry_run": false, "test": true,
	}, nil
}

// asPlain is v as journal JSON reads back: exact numbers, hex strings.
func asPlain(v any) (any, error) {
	b, err := workflow.MarshalJSON(v)
	if err != nil {
		return nil, err
	}
	return plainJSON(b)
}
