package workflow

import (
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/robfig/cron/v3"

	"github.com/rflow-dev/rflow/trigger"
	"github.com/rflow-dev/rflow/units"
)

// Defaults applied by the loader. They are documented in docs/workflows.md.
const (
	DefaultConfirmations     = 2
	DefaultBlockPollInterval = time.Second
	DefaultMaxBlockRange     = 2000
	DefaultHTTPTimeout       = 30 * time.Second
	DefaultWebhookTTL        = 24 * time.Hour
	DefaultRetryDelay        = time.Second
	DefaultRetryMaxDelay     = 5 * time.Minute
	DefaultApprovalTimeout   = 24 * time.Hour
	DefaultOnFailure         = "dead_letter"
)

// Project is a loaded, checked rflow.yaml with everything it includes.
type Project struct {
	Name        string
	DatabaseURL string
	// Dir is the directory of the project file; relative paths resolve
	// against it.
	Dir       string
	Networks  []*Network
	Wallets   []*Wallet
	Contracts []*Contract
	Workflows []*Workflow
	// Notifiers are the project's named pager destinations (notifiers.go).
	Notifiers []*Notifier
	// Env is the sorted allowlist of environment variables workflows may
	// read as env.NAME (the project file's env:). The engine exposes these
	// and nothing else.
	Env []string
	// Idempotency is the command ledger's retention (see idempotency.go).
	Idempotency Idempotency
	// APITokens are the scoped tokens of api: tokens: (api.go), besides
	// RFLOW_API_TOKEN, which holds every role.
	APITokens []*APIToken
	// Warnings holds what validation warned about (never errors: those make
	// Load fail).
	Warnings Diagnostics

	lookupEnv func(string) (string, bool)
	// secretVars and secretValues are the credential variables and values
	// no workflow definition may interpolate (envrefs.go).
	secretVars   map[string]secretVar
	secretValues map[string]string
	file         string // the project file's base name, for messages
	// allowUnsetEnv is LoadOptions.AllowUnsetEnv; CompileSpec honours it too.
	allowUnsetEnv bool
	// sources are the files Load read, by path relative to Dir;
	// sourcesOutside is set when one lies outside Dir (see Sources).
	sources        map[string][]byte
	sourcesOutside bool
}

// Sources returns the files Load read to build the project (the project
// file, its includes and ABIs), by slash-separated path relative to the
// project file's directory, as they were read: ${VAR} references are
// there, not their values. Loaded again from a directory holding just
// these files, they make the same project. ok is false when a file lay
// outside that directory (an ABI under ../): then they do not.
func (p *Project) Sources() (files map[string][]byte, ok bool) {
	return p.sources, !p.sourcesOutside && len(p.sources) > 0
}

// File is the project file's name (its base name, in Dir).
func (p *Project) File() string { return p.file }

// Network returns the network called name, or nil.
func (p *Project) Network(name string) *Network {
	for _, n := range p.Networks {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Wallet returns the wallet called name, or nil.
func (p *Project) Wallet(name string) *Wallet {
	for _, w := range p.Wallets {
		if w.Name == name {
			return w
		}
	}
	return nil
}

// Contract returns the contract called name, or nil.
func (p *Project) Contract(name string) *Contract {
	for _, c := range p.Contracts {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Workflow returns the workflow called name, or nil.
func (p *Project) Workflow(name string) *Workflow {
	for _, w := range p.Workflows {
		if w.Name == name {
			return w
		}
	}
	return nil
}

// Network is a chain rflow reads from and sends to.
type Network struct {
	Name    string
	ChainID uint64
	// RPC holds one or more HTTP(S) JSON-RPC URLs, in failover order.
	RPC []string
	// WS is an optional websocket URL for head subscriptions.
	WS string
	// Confirmations is the reorg-safe depth triggers and waits use unless
	// they override it (default 2).
	Confirmations     int
	BlockPollInterval time.Duration // default 1s
	MaxBlockRange     uint64        // default 2000
	// Finality declares whether the network's nodes serve the safe and
	// finalized block tags: FinalityTags, FinalityNone, or "" (not
	// declared: rflow start asks the node).
	Finality string
	// Currency is the unit native amounts on the network are shown in
	// (currency: { symbol, decimals }; ETH with 18 decimals by default).
	Currency units.Unit
	// Explorer is the base URL of the network's block explorer (explorer:,
	// https, no trailing slash), or "": the console links transactions and
	// blocks to it.
	Explorer string
	Pos      Position
}

// Network finality declarations (the network's finality: key).
const (
	FinalityTags = "tags"
	FinalityNone = "none"
)

// Block tags a trigger's run_on or a wait's confirmations can follow
// instead of a depth.
const (
	TagSafe      = "safe"
	TagFinalized = "finalized"
)

// Wallet is a signing key for sends: either a raw private key or a
// keystore file with its password.
type Wallet struct {
	Name       string
	PrivateKey Secret
	Keystore   string // absolute path
	Password   Secret
	// MaxFee caps the fee per gas of the wallet's sends (max_fee: the
	// EIP-1559 max fee, a legacy gas price), in wei; nil: no cap.
	MaxFee *big.Int
	// MaxPriorityFee caps their tip (max_priority_fee), in wei; nil: no cap.
	MaxPriorityFee *big.Int
	Pos            Position
}

// Contract is a deployed contract with its ABI.
type Contract struct {
	Name       string
	Network    string
	ABI        *abi.ABI
	Address    common.Address
	StartBlock uint64
	// Token is the unit of the ERC-20 amounts the contract moves (token:
	// { symbol, decimals }); nil when the project file declares none.
	Token *units.Unit
	Pos   Position
}

// Workflow is one checked workflow definition.
type Workflow struct {
	Name    string
	Trigger Trigger
	Steps   []*Step
	// Finally runs after Steps whether they succeeded or failed.
	Finally []*Step
	// OnReorg runs once per (run, fork) when the triggering log is orphaned.
	OnReorg []*Step
	// OnFailure is what happens to a run that fails terminally:
	// "dead_letter" (the default) keeps it in the DLQ for `rflow runs retry`.
	OnFailure      string
	Throttle       *Throttle
	RateLimit      *RateLimit
	Concurrency    *Concurrency
	Budgets        []BudgetRef
	CircuitBreaker *CircuitBreaker
	// Spec is the canonical JSON of the definition as written (defaults not
	// applied, ${VAR} references kept unresolved); Hash is its hex sha256.
	// The same definition gives the same Spec whatever its formatting.
	Spec []byte
	Hash string
	Pos  Position
	// Warnings are this workflow's warnings when it came from ParseWorkflow
	// or CompileSpec (Load puts them in Project.Warnings).
	Warnings Diagnostics
}

// Step returns the step with id anywhere in the workflow (including
// foreach bodies, finally and on_reorg), or nil.
func (w *Workflow) Step(id string) *Step {
	var found *Step
	walkSteps(w.allLists(), func(s *Step) {
		if s.ID == id && found == nil {
			found = s
		}
	})
	return found
}

// GatedSends returns the workflow's send steps with approval:, anywhere in
// it (foreach bodies, finally and on_reorg too), in file order.
func (w *Workflow) GatedSends() []*Step {
	var gated []*Step
	walkSteps(w.allLists(), func(s *Step) {
		if s.Send != nil && s.Send.Approval != nil {
			gated = append(gated, s)
		}
	})
	return gated
}

func (w *Workflow) allLists() [][]*Step { return [][]*Step{w.Steps, w.Finally, w.OnReorg} }

func walkSteps(lists [][]*Step, fn func(*Step)) {
	for _, l := range lists {
		for _, s := range l {
			fn(s)
			if s.Foreach != nil {
				walkSteps([][]*Step{s.Foreach.Steps}, fn)
			}
		}
	}
}

// Trigger is what starts a run. Exactly one of the kind-specific fields is
// set, matching Kind.
type Trigger struct {
	Kind    trigger.Kind
	Event   *EventTrigger
	Cron    *CronTrigger
	Block   *BlockTrigger
	Read    *ReadTrigger
	Webhook *WebhookTrigger
	Manual  *ManualTrigger
	Pos     Position
}

// Run-on phases of event triggers.
const (
	RunOnHead      = "head"
	RunOnConfirmed = "confirmed"
	RunOnBoth      = "both"
	RunOnSafe      = TagSafe
	RunOnFinalized = TagFinalized
)

// EventTrigger starts a run for each matching log of a contract event.
type EventTrigger struct {
	Contract string
	Event    string
	Where    *Expr
	// Confirmations overrides the network's depth; nil = the network's.
	Confirmations *int
	RunOn         string // head | confirmed (default) | both | safe | finalized
	ABIEvent      *abi.Event
}

// CronTrigger starts a run at each tick of a schedule (UTC).
type CronTrigger struct {
	Schedule string
	// CatchUp replays ticks missed while no process was running (newest 100).
	CatchUp  bool
	schedule cron.Schedule
}

// Next returns the first tick strictly after after (UTC), or the zero time
// for a trigger that did not come from the loader.
func (c *CronTrigger) Next(after time.Time) time.Time {
	if c == nil || c.schedule == nil {
		return time.Time{}
	}
	return c.schedule.Next(after.UTC())
}

// BlockTrigger starts a run every Every blocks of a network.
type BlockTrigger struct {
	Network string
	Every   uint64 // default 1
	// RunOn is RunOnHead (the default: a block fires once in the window),
	// RunOnSafe or RunOnFinalized (once the node's tag block reaches it).
	RunOn string
}

// ReadTrigger calls a view function periodically and starts a run when When
// holds (every poll when When is nil). Exactly one of Every and EveryBlocks
// is set.
type ReadTrigger struct {
	Contract    string
	Function    string
	Args        []*Value
	Every       time.Duration
	EveryBlocks uint64
	When        *Expr
	ABIMethod   *abi.Method
}

// WebhookTrigger starts a run for each POST /hooks/{workflow}.
type WebhookTrigger struct {
	// Secret, when set, requires X-Rflow-Signature on each request.
	Secret Secret
	// IdempotencyKey computes the claim key from headers/body; nil makes the
	// trigger at-least-once (every POST is a new run).
	IdempotencyKey *Expr
	TTL            time.Duration // default 24h
	// SignedHeaders names (lower case) the headers a v2 signature must
	// cover: those the idempotency key reads.
	SignedHeaders []string
	// LegacySignatures also accepts v1 signatures (timestamp and body
	// only). Deprecated: validate warns, and the server logs each use.
	LegacySignatures bool
}

// ManualTrigger starts a run from `rflow run` or the HTTP API.
type ManualTrigger struct{}

// Step kinds.
const (
	StepHTTPCall = "http_call"
	StepNotify   = "notify"
	StepSend     = "send"
	StepWaitFor  = "wait_for"
	StepForeach  = "foreach"
	StepDelay    = "delay"
	StepGoto     = "goto"
	StepFail     = "fail"
	StepNoop     = "noop"
)

// Step is one unit of a workflow. Exactly one kind-specific field is set,
// matching Kind (Goto and Fail hold the data of their kinds).
type Step struct {
	ID   string
	Kind string
	// If skips the step when it evaluates to false.
	If       *Expr
	HTTPCall *HTTPCall
	Notify   *Notify
	Send     *Send
	WaitFor  *WaitFor
	Foreach  *Foreach
	Delay    *Delay
	Goto     string // target step id (same or enclosing step list)
	Fail     *Value // the failure message
	// Retry is nil when the step is tried once.
	Retry *Retry
	Pos   Position
}

// HTTPCall is an outgoing HTTP request.
type HTTPCall struct {
	Method       string // upper case; default GET, POST when a body is set
	URL          *Value
	Headers      map[string]*Value
	Body         *Value
	Timeout      time.Duration // default 30s
	ExpectStatus []int         // nil = any 2xx
	HMACSecret   Secret
}

// Notify formats.
const (
	NotifyWebhook = "webhook"
	NotifySlack   = "slack"
	NotifyDiscord = "discord"
)

// Notify sends a message to a webhook, Slack or Discord URL.
type Notify struct {
	Format string // webhook | slack | discord
	URL    *Value
	Text   *Value
	Body   *Value
}

// Send queues a transaction through the relayer: a plain value transfer
// (To/Value/Data) or a contract call (Contract/Function/Args).
type Send struct {
	Wallet    string
	Network   string
	Contract  string // set for contract calls; To is then the contract's address
	To        *Value
	Value     *Value // wei; nil = 0
	Data      *Value
	Function  string
	Args      []*Value
	ABI       *abi.ABI // the contract's ABI when Function is set
	ABIMethod *abi.Method
	// Confirmations the step waits for after inclusion; nil = the network's.
	Confirmations *int
	Budget        string
	Approval      *Approval
}

// Approval gates a send on a human decision.
type Approval struct {
	// Required decides per run whether approval is needed; nil = always.
	Required  *Expr
	Timeout   time.Duration // default 24h
	OnTimeout string        // reject (default) | proceed
	// Notify names the project notifier told of each pending approval,
	// with its summary and the commands to decide it ("": none).
	Notify string
}

// WaitFor parks a run until an event arrives or the timeout passes.
type WaitFor struct {
	Event         *WaitEvent
	Confirmations *int // nil = the network's
	// Finality, when set (TagSafe or TagFinalized: confirmations: safe or
	// finalized), settles the wait once its block is at or below the
	// node's block of that tag instead of at a depth; Confirmations is
	// then nil.
	Finality      string
	Timeout       time.Duration
	OnTimeoutGoto string
	// OnTimeoutFail fails the run at the timeout (the default when no goto).
	OnTimeoutFail bool
}

// WaitEvent is the event a wait_for step waits for.
type WaitEvent struct {
	Contract string
	Event    string
	Where    *Expr
	ABIEvent *abi.Event
	// Keys are the equalities Where requires of the event (see WaitKey).
	Keys []WaitKey
}

// Foreach runs Steps once per item of Items.
type Foreach struct {
	Items       *Expr
	Steps       []*Step
	Concurrency int // default 1
}

// Delay pauses a run for Duration, or until the time Until evaluates to.
type Delay struct {
	Duration time.Duration
	Until    *Expr
}

// Throttle limits how many runs start per window; excess claims wait in
// Postgres, they are never dropped.
type Throttle struct {
	Max int
	Per time.Duration
}

// RateLimit limits step executions per window; Durable keeps the window in
// Postgres so a restart cannot reset it.
type RateLimit struct {
	Max     int
	Per     time.Duration
	Durable bool
}

// Concurrency caps how many runs of the workflow are in flight at once per
// key; the others wait (status throttled) in claim order.
type Concurrency struct {
	Max int
	// Key is evaluated over the trigger when the run is claimed; nil puts
	// every run under one key.
	Key *Expr
}

// BudgetRef caps cumulative spend of an asset inside a rolling window.
type BudgetRef struct {
	Name string
	// Asset is "native" or the name of an ERC-20 contract.
	Asset   string
	Cap     *big.Int // in the asset's smallest unit (wei for native)
	CapText string   // as written, e.g. "5 ether"
	Window  time.Duration
	// Unit is what the budget's amounts are shown in (Project.AssetUnit).
	Unit units.Unit
}

// CircuitBreaker pauses a workflow after Failures failed runs in Window.
type CircuitBreaker struct {
	Failures int
	Window   time.Duration
	// Notify names the project notifier paged once per trip ("": none).
	Notify    string
	NotifyPos Position
}
