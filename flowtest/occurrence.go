package flowtest

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/flowtest/fixture"
	"github.com/rflow-dev/rflow/rehearsal"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/workflow"
)

// claimer turns a test's occurrences into claims of its namespaced
// workflow, built as the live producers build them (an event is ABI-encoded
// into a log and decoded back, as ingestion decodes; where:/when: filter as
// on chain), with keys under the test's prefix. A claim carries no chain
// coordinates, so a live reorg can never mark a test run.
type claimer struct {
	p    *workflow.Project
	wf   *workflow.Workflow
	id   uuid.UUID
	name string
	env  map[string]any
}

func newClaimer(p *workflow.Project, wf *workflow.Workflow, id uuid.UUID) *claimer {
	env := map[string]any{}
	for _, k := range p.Env {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	return &claimer{p: p, wf: wf, id: id, name: rehearsal.TestName(id, wf.Name), env: env}
}

// occurrenceError is a problem with one occurrence, at its place.
type occurrenceError struct {
	pos workflow.Position
	msg string
}

func (c *claimer) errorf(o fixture.Occurrence, format string, args ...any) error {
	return &occurrenceError{pos: o.Pos, msg: fmt.Sprintf(format, args...)}
}

func (e *occurrenceError) Error() string { return e.pos.String() + ": " + e.msg }

// claim builds o's claim; ok is false when the trigger's where:/when:
// rejects it (no run, as on chain).
func (c *claimer) claim(o fixture.Occurrence) (claim store.Claim, ok bool, err error) {
	if o.Kind != c.wf.Trigger.Kind {
		return claim, false, c.errorf(o, "workflow %s has a %s trigger; this occurrence is a %s", c.wf.Name, c.wf.Trigger.Kind, o.Kind)
	}
	key := o.Key
	if key == "" {
		key = uuid.NewString()
	}
	claim = store.Claim{Workflow: c.name, TriggerKind: o.Kind}
	switch o.Kind {
	case trigger.Event:
		return c.event(o)
	case trigger.Cron:
		tick, err := time.Parse(time.RFC3339, o.Body.Plain().(string))
		if err != nil {
			return claim, false, c.errorf(o, "cron: %q is not an RFC 3339 time (2026-01-01T00:00:00Z)", o.Body.Plain())
		}
		t := tick.UTC().Format(time.RFC3339)
		claim.TriggerKey = t
		claim.Trigger, err = json.Marshal(trigger.CronPayload{Tick: t})
	case trigger.Block:
		n, _ := fixture.Int(o.Body)
		claim.TriggerKey = strconv.FormatInt(n, 10)
		claim.Trigger, err = json.Marshal(trigger.BlockPayload{Block: uint64(n)})
	case trigger.Read:
		var blk int64
		if b := o.Body.Get("block"); b != nil {
			blk, _ = fixture.Int(b)
			key = strconv.FormatInt(blk, 10)
		}
		result := o.Body.Get("result").Plain()
		if w := c.wf.Trigger.Read.When; w != nil {
			v, err := workflow.Normalize(result)
			if err != nil {
				return claim, false, c.errorf(o, "read result: %v", err)
			}
			pass, err := w.Bool(workflow.Env{"result": v, "env": c.env})
			if err != nil {
				claim.TriggerError = "trigger when: " + err.Error()
			} else if !pass {
				return claim, false, nil
			}
		}
		claim.TriggerKey = key
		claim.Trigger, err = json.Marshal(trigger.ReadPayload{Result: result, Block: uint64(blk)})
	case trigger.Webhook:
		return c.webhook(o, key)
	case trigger.Manual:
		var input json.RawMessage
		if in := o.Body.Get("input"); in != nil {
			if input, err = json.Marshal(in.Plain()); err != nil {
				return claim, false, c.errorf(o, "manual input: %v", err)
			}
		}
		claim = store.ManualClaim(c.name, key, input)
	}
	if err != nil {
		return claim, false, c.errorf(o, "%v", err)
	}
	claim.TriggerKey = rehearsal.TestKey(c.id, claim.TriggerKey)
	return claim, true, nil
}

func (c *claimer) webhook(o fixture.Occurrence, key string) (store.Claim, bool, error) {
	claim := store.Claim{Workflow: c.name, TriggerKind: trigger.Webhook}
	body, err := json.Marshal(o.Body.Get("body").Plain())
	if err != nil {
		return claim, false, c.errorf(o, "webhook body: %v", err)
	}
	headers := map[string]string{}
	if h := o.Body.Get("headers"); h != nil {
		headers = fixture.Headers(h)
	}
	if ik := c.wf.Trigger.Webhook.IdempotencyKey; ik != nil && o.Key == "" {
		decoded, err := workflow.UnmarshalJSON(body)
		if err != nil {
			return claim, false, c.errorf(o, "webhook body: %v", err)
		}
		hs := make(map[string]any, len(headers))
		for k, v := range headers {
			hs[k] = v
		}
		v, err := ik.Eval(workflow.Env{"headers": hs, "body": decoded})
		if err != nil {
			return claim, false, c.errorf(o, "the trigger's idempotency_key cannot be computed from this request: %v", err)
		}
		key = fmt.Sprint(v)
	}
	claim.Trigger, err = json.Marshal(trigger.WebhookPayload{Headers: headers, Body: body})
	if err != nil {
		return claim, false, c.errorf(o, "%v", err)
	}
	claim.TriggerKey = rehearsal.TestKey(c.id, key)
	return claim, true, nil
}

// eventMeta are the log coordinates an event occurrence may set besides
// its args (as `rflow run --event` takes them).
var eventMeta = map[string]bool{"block": true, "tx_hash": true, "log_index": true, "address": true}

func (c *claimer) event(o fixture.Occurrence) (store.Claim, bool, error) {
	claim := store.Claim{Workflow: c.name, TriggerKind: trigger.Event}
	t := c.wf.Trigger.Event
	ct := c.p.Contract(t.Contract)
	if ct == nil || ct.ABI == nil || t.ABIEvent == nil {
		return claim, false, c.errorf(o, "workflow %s: contract %s has no ABI event %s", c.wf.Name, t.Contract, t.Event)
	}
	ev, err := chain.NewEvent(*ct.ABI, t.Event)
	if err != nil {
		return claim, false, c.errorf(o, "%v", err)
	}
	fields, _ := o.Body.Plain().(map[string]any)
	args := make([]any, len(t.ABIEvent.Inputs))
	var missing []string
	for i, in := range t.ABIEvent.Inputs {
		v, ok := fields[in.Name]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (%s)", in.Name, in.Type))
			continue
		}
		if args[i], err = workflow.ABIValue(numbersAsText(v), in.Type); err != nil {
			return claim, false, c.fieldError(o, in.Name, "%s (%s): %v", in.Name, in.Type, err)
		}
	}
	if len(missing) > 0 {
		return claim, false, c.errorf(o, "event %s: missing %s", t.Event, strings.Join(missing, ", "))
	}
	for _, f := range o.Body.Fields {
		known := eventMeta[f.Key]
		for _, in := range t.ABIEvent.Inputs {
			known = known || in.Name == f.Key
		}
		if !known {
			return claim, false, &occurrenceError{pos: f.KeyPos, msg: fmt.Sprintf("%s is not an argument of event %s nor one of block, tx_hash, log_index, address", f.Key, t.Event)}
		}
	}
	base := types.Log{Address: ct.Address, TxHash: common.Hash(uuidHash(c.id, o.Pos))}
	if v, ok := fields["block"]; ok {
		b, err := workflow.ABIValue(numbersAsText(v), abiType("uint64"))
		if err != nil {
			return claim, false, c.fieldError(o, "block", "block: %v", err)
		}
		base.BlockNumber = b.(uint64)
	}
	if v, ok := fields["log_index"]; ok {
		i, err := workflow.ABIValue(numbersAsText(v), abiType("uint64"))
		if err != nil {
			return claim, false, c.fieldError(o, "log_index", "log_index: %v", err)
		}
		base.Index = uint(i.(uint64))
	}
	if v, ok := fields["tx_hash"]; ok {
		b, err := workflow.ABIValue(v, abiType("bytes32"))
		if err != nil {
			return claim, false, c.fieldError(o, "tx_hash", "tx_hash %v is not a 32-byte 0x hash", v)
		}
		base.TxHash = common.Hash(b.([32]byte))
	}
	if v, ok := fields["address"]; ok {
		s, isStr := v.(string)
		if !isStr || !common.IsHexAddress(s) {
			return claim, false, c.fieldError(o, "address", "address %v is not a 0x address", v)
		}
		base.Address = common.HexToAddress(s)
	}
	l, err := ev.EncodeLog(base, args)
	if err != nil {
		return claim, false, c.errorf(o, "%v", err)
	}
	d, err := ev.Decode(l)
	if err != nil {
		return claim, false, c.errorf(o, "decode the log: %v", err)
	}
	if t.Where != nil {
		v, err := workflow.Normalize(d.Fields())
		if err != nil {
			return claim, false, c.errorf(o, "%v", err)
		}
		pass, err := t.Where.Bool(workflow.Env{"event": v, "env": c.env})
		if err != nil {
			claim.TriggerError = "trigger where: " + err.Error()
		} else if !pass {
			return claim, false, nil
		}
	}
	phase := chain.PhaseConfirmed
	if t.RunOn == workflow.RunOnHead {
		phase = chain.PhaseHead
	}
	claim.Trigger, err = trigger.EventPayload{Event: d, Block: l.BlockNumber, Phase: string(phase)}.MarshalJSON()
	if err != nil {
		return claim, false, c.errorf(o, "%v", err)
	}
	key := o.Key
	if key == "" {
		var chainID uint64
		if n := c.p.Network(ct.Network); n != nil {
			chainID = n.ChainID
		}
		key = fmt.Sprintf("%d:%s:%d", chainID, l.TxHash.Hex(), l.Index)
	}
	claim.TriggerKey = rehearsal.TestKey(c.id, key)
	return claim, true, nil
}

func (c *claimer) fieldError(o fixture.Occurrence, field, format string, args ...any) error {
	pos := o.Pos
	for _, f := range o.Body.Fields {
		if f.Key == field {
			pos = f.Value.Pos
		}
	}
	return &occurrenceError{pos: pos, msg: fmt.Sprintf(format, args...)}
}

// uuidHash is a distinct transaction hash per occurrence, so two events of
// one test are two logs unless the test says otherwise.
func uuidHash(id uuid.UUID, pos workflow.Position) [32]byte {
	var h [32]byte
	copy(h[:16], id[:])
	copy(h[16:], fmt.Sprintf("%08d%08d", pos.Line, pos.Col))
	return h
}

func abiType(name string) abi.Type {
	t, err := abi.NewType(name, "", nil)
	if err != nil {
		panic(err) // the names above are valid ABI types
	}
	return t
}

// numbersAsText turns json.Numbers into their text, which
// workflow.ABIValue reads exactly whatever their size.
func numbersAsText(v any) any {
	switch x := v.(type) {
	case json.Number:
		return x.String()
	case []any:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = numbersAsText(it)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, it := range x {
			out[k] = numbersAsText(it)
		}
		return out
	}
	return v
}
