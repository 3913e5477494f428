package rpcproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// answer answers one call: a refusal f calls for, the lagging node's
// answer, or the upstream node's.
func (p *Proxy) answer(r *http.Request, f Faults, lagging bool, c call) reply {
	if msg, ok := f.Refuse[c.Method]; ok {
		p.count(RefusedMethod, 1)
		return reply{ID: c.ID, Error: &rpcError{Code: -32000, Message: msg}}
	}
	var head uint64 // the lagging node's head
	if lagging {
		p.count(RefusedLag, 1)
		real, err := p.blockNumber(r)
		if err != nil {
			return reply{ID: c.ID, Error: &rpcError{Code: -32603, Message: "rpcproxy: upstream: " + err.Error()}}
		}
		head = real - min(real, f.Lag)
		if rep, ok := lagAnswer(&c, head); ok {
			return rep
		}
	}
	if c.Method == "eth_getLogs" && len(c.Params) == 1 {
		if rep, ok := p.refuseLogs(f, lagging, head, &c); ok {
			return rep
		}
	}
	p.mu.Lock()
	p.relayed[c.Method]++
	p.mu.Unlock()
	rep, err := p.forward(r, c)
	if err != nil {
		return reply{ID: c.ID, Error: &rpcError{Code: -32603, Message: "rpcproxy: upstream: " + err.Error()}}
	}
	switch {
	case lagging && rep.Error == nil && beyond(c.Method, rep.Result, head):
		rep.Result = json.RawMessage("null")
	case c.Method == "eth_getLogs" && f.ResultLimit > 0 && rep.Error == nil:
		var logs []json.RawMessage
		if json.Unmarshal(rep.Result, &logs) == nil && len(logs) > f.ResultLimit {
			p.count(RefusedResults, 1)
			return reply{ID: c.ID, Error: &rpcError{Code: -32005,
				Message: fmt.Sprintf("query returned more than %d results", f.ResultLimit)}}
		}
	}
	return rep
}

// refuseLogs refuses an eth_getLogs the faults do not let through, or
// narrows it to what a lagging node that hides logs has.
func (p *Proxy) refuseLogs(f Faults, lagging bool, head uint64, c *call) (reply, bool) {
	var q map[string]any
	if json.Unmarshal(c.Params[0], &q) != nil {
		return reply{}, false
	}
	fromHex, _ := q["fromBlock"].(string)
	toHex, _ := q["toBlock"].(string)
	from, okFrom := hexNumber(fromHex)
	to, okTo := hexNumber(toHex)
	if !okFrom || !okTo {
		return reply{}, false
	}
	switch {
	case lagging && to > head && !f.LagHidesLogs:
		return reply{ID: c.ID, Error: &rpcError{Code: -32602, Message: "block range extends beyond current head block"}}, true
	case lagging && to > head && from > head:
		return reply{ID: c.ID, Result: json.RawMessage("[]")}, true
	case lagging && to > head:
		q["toBlock"] = "0x" + strconv.FormatUint(head, 16)
		narrowed, err := json.Marshal(q)
		if err != nil {
			return reply{}, false
		}
		c.Params = append([]json.RawMessage{narrowed}, c.Params[1:]...)
	}
	if f.RangeLimit > 0 && to >= from && to-from+1 > f.RangeLimit {
		p.count(RefusedRange, 1)
		e := f.RangeStyle.rangeError(f.RangeLimit, from)
		return reply{ID: c.ID, Error: &e}, true
	}
	return reply{}, false
}

// lagAnswer answers what a node at head answers without asking upstream.
// A "latest" block is asked of upstream as the head block.
func lagAnswer(c *call, head uint64) (reply, bool) {
	hex := json.RawMessage(strconv.Quote("0x" + strconv.FormatUint(head, 16)))
	switch c.Method {
	case "eth_blockNumber":
		return reply{ID: c.ID, Result: hex}, true
	case "eth_getBlockByNumber":
		if len(c.Params) == 0 {
			return reply{}, false
		}
		var tag string
		if json.Unmarshal(c.Params[0], &tag) != nil {
			return reply{}, false
		}
		if tag == "latest" || tag == "pending" {
			c.Params = append([]json.RawMessage{hex}, c.Params[1:]...)
			return reply{}, false
		}
		if n, ok := hexNumber(tag); ok && n > head {
			return reply{ID: c.ID, Result: json.RawMessage("null")}, true
		}
	}
	return reply{}, false
}

// beyond reports whether an upstream result of method is of a block past
// head: a block, receipt or transaction the lagging node has not seen.
func beyond(method string, result json.RawMessage, head uint64) bool {
	switch method {
	case "eth_getBlockByHash", "eth_getBlockByNumber", "eth_getTransactionReceipt", "eth_getTransactionByHash":
	default:
		return false
	}
	var obj struct {
		Number      string `json:"number"`
		BlockNumber string `json:"blockNumber"`
	}
	if json.Unmarshal(result, &obj) != nil {
		return false
	}
	n, ok := hexNumber(obj.Number)
	if !ok {
		n, ok = hexNumber(obj.BlockNumber)
	}
	return ok && n > head
}

// forward sends c alone to the upstream node.
func (p *Proxy) forward(r *http.Request, c call) (reply, error) {
	params := c.Params
	if params == nil {
		params = []json.RawMessage{}
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.ID, "method": c.Method, "params": params})
	if err != nil {
		return reply{}, err
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, p.upstream, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	var rep reply
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return reply{}, fmt.Errorf("%s: %w", resp.Status, err)
	}
	rep.ID = c.ID
	return rep, nil
}

// blockNumber is the upstream node's head (not counted as a call).
func (p *Proxy) blockNumber(r *http.Request) (uint64, error) {
	rep, err := p.forward(r, call{ID: json.RawMessage("0"), Method: "eth_blockNumber"})
	if err != nil {
		return 0, err
	}
	if rep.Error != nil {
		return 0, fmt.Errorf("eth_blockNumber: %s", rep.Error.Message)
	}
	var s string
	if err := json.Unmarshal(rep.Result, &s); err != nil {
		return 0, err
	}
	n, ok := hexNumber(s)
	if !ok {
		return 0, fmt.Errorf("eth_blockNumber: %q is not a number", s)
	}
	return n, nil
}

func hexNumber(s string) (uint64, bool) {
	if !strings.HasPrefix(s, "0x") {
		return 0, false
	}
	n, err := strconv.ParseUint(s[2:], 16, 64)
	return n, err == nil
}
