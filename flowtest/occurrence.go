package flowtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/uuid"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/flowtest/fixture"
	"github.com/rflow-dev/rflow/jobs"
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
	p   *workflow.Project
	wf  *workflow.Workflow
	id  uuid.UUID
	r   store.Rehearsal
	env map[string]any
}

func newClaimer(p *workflow.Project, wf *workflow.Workflow, id uuid.UUID, r store.Rehearsal) *claimer {
	env := map[string]any{}
	for _, k := range p.Env {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	return &claimer{p: p, wf: wf, id: id, r: r, env: env}
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
	claim = store.Claim{Workflow: c.r.Name(), TriggerKind: o.Kind}
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
		result := readResult(c.wf.Trigger.Read, o.Body.Get("result").Plain())
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
		claim = store.ManualClaim(c.r.Name(), key, input)
	}
	if err != nil {
		return claim, false, c.errorf(o, "%v", err)
	}
	claim.TriggerKey = c.r.TriggerKey(claim.TriggerKey)
	return claim, true, nil
}

func (c *claimer) webhook(o fixture.Occurrence, key string) (store.Claim, bool, error) {
	claim := store.Claim{Workflow: c.r.Name(), TriggerKind: trigger.Webhook}
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
	claim.TriggerKey = c.r.TriggerKey(key)
	return claim, true, nil
}

func (c *claimer) event(o fixture.Occurrence) (store.Claim, bool, error) {
	claim := store.Claim{Workflow: c.r.Name(), TriggerKind: trigger.Event}
	t := c.wf.Trigger.Event
	fields, _ := o.Body.Plain().(map[string]any)
	d, l, err := jobs.EventOccurrence(c.p, c.wf, fields, types.Log{TxHash: common.Hash(uuidHash(c.id, o.Pos))})
	var fe *jobs.EventFieldError
	if errors.As(err, &fe) {
		pos := o.Pos
		for _, f := range o.Body.Fields {
			if f.Key == fe.Field {
				pos = f.KeyPos
			}
		}
		return claim, false, &occurrenceError{pos: pos, msg: "event: " + fe.Msg}
	}
	if err != nil {
		return claim, false, c.errorf(o, "%v", err)
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
	switch t.RunOn {
	case workflow.RunOnHead, workflow.RunOnSafe, workflow.RunOnFinalized:
		phase = chain.Phase(t.RunOn)
	}
	claim.Trigger, err = trigger.EventPayload{Event: d, Block: l.BlockNumber, Phase: string(phase)}.MarshalJSON()
	if err != nil {
		return claim, false, c.errorf(o, "%v", err)
	}
	key := o.Key
	if key == "" {
		var chainID uint64
		if n := c.p.Network(c.p.Contract(t.Contract).Network); n != nil {
			chainID = n.ChainID
		}
		key = chain.EventKey(int64(chainID), l.TxHash, d.TxLogIndex, phase, false)
	}
	claim.TriggerKey = c.r.TriggerKey(key)
	return claim, true, nil
}

// uuidHash is a distinct transaction hash per occurrence, so two events of
// one test are two logs unless the test says otherwise.
func uuidHash(id uuid.UUID, pos workflow.Position) [32]byte {
	var h [32]byte
	copy(h[:16], id[:])
	copy(h[16:], fmt.Sprintf("%08d%08d", pos.Line, pos.Col))
	return h
}

// readResult is a fixture's read result as the read trigger decodes it: a
// view with several outputs gives an object by output name, so a list
// written as ethers prints a Result ([100, 200]) becomes one by position.
func readResult(rt *workflow.ReadTrigger, result any) any {
	list, ok := result.([]any)
	if !ok || rt == nil || rt.ABIMethod == nil || len(rt.ABIMethod.Outputs) < 2 || len(list) != len(rt.ABIMethod.Outputs) {
		return result
	}
	m := make(map[string]any, len(list))
	for i, name := range trigger.ResultNames(rt.ABIMethod.Outputs) {
		m[name] = list[i]
	}
	return m
}
