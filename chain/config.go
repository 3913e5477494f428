package chain

import (
	"context"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/store"
)

// Claimer turns claims into runs inside the caller's transaction: the engine
// runs store.ClaimRuns and enqueues each new run's first step job in tx. It
// returns how many runs were created.
type Claimer interface {
	ClaimTx(ctx context.Context, tx pgx.Tx, claims []store.Claim) (int, error)
}

// Network is one chain rflow watches.
type Network struct {
	Name    string
	ChainID int64
	// RPC lists HTTP JSON-RPC URLs, in failover order.
	RPC []string
	// WS optionally names a WebSocket URL whose newHeads wake the head
	// tracker early; polling at BlockPollInterval stays the baseline.
	WS string
	// Confirmations is the default depth of the confirmed phase.
	Confirmations int
	// BlockPollInterval is how often the head is polled (default 1s).
	BlockPollInterval time.Duration
	// MaxBlockRange caps one eth_getLogs range (default 2000); ranges
	// shrink on "too many results" and grow back.
	MaxBlockRange uint64
	// Window is how many recent blocks the block-hash window keeps
	// (default 256); reorgs deeper than it are handled as a replaced chain.
	Window int
	// Finality says whether the network's nodes serve the safe and
	// finalized block tags (see finality.go): FinalityNone turns the
	// tag polling off.
	Finality Finality
}

// Finality is a network's declaration of the safe and finalized block
// tags (rflow.yaml's finality:).
type Finality string

// Finality declarations. FinalityUnknown polls the tags and finds out.
const (
	FinalityUnknown Finality = ""
	FinalityTags    Finality = "tags"
	FinalityNone    Finality = "none"
)

func (n Network) withDefaults() Network {
	if n.BlockPollInterval <= 0 {
		n.BlockPollInterval = time.Second
	}
	if n.MaxBlockRange == 0 {
		n.MaxBlockRange = 2000
	}
	if n.Window <= 0 {
		n.Window = 256
	}
	return n
}

// Phase is when a log is delivered: at the head (depth 0), once it has the
// configured confirmations, or once the node's safe or finalized block
// reaches it.
type Phase string

// Phases.
const (
	PhaseHead      Phase = "head"
	PhaseConfirmed Phase = "confirmed"
	PhaseSafe      Phase = "safe"
	PhaseFinalized Phase = "finalized"
)

// RunOn selects the phases an event trigger claims runs in.
type RunOn string

// RunOn values. Under RunOnBoth each log claims twice, with keys suffixed
// :head and :confirmed.
const (
	RunOnHead      RunOn = "head"
	RunOnConfirmed RunOn = "confirmed"
	RunOnBoth      RunOn = "both"
	RunOnSafe      RunOn = "safe"
	RunOnFinalized RunOn = "finalized"
)

// EventTrigger claims one run per matching log (per phase).
type EventTrigger struct {
	// Workflow is the workflow runs are claimed for; it names the task.
	Workflow string
	Network  string
	// Addresses filters logs by emitting contract (empty: any).
	Addresses []common.Address
	Event     *Event
	// StartBlock is where a new trigger starts scanning.
	StartBlock uint64
	// Confirmations overrides the network's depth for the confirmed phase.
	Confirmations *int
	// RunOn defaults to RunOnConfirmed.
	RunOn RunOn
	// Where, when set, filters decoded logs (Decoded.Fields) before claiming.
	// An error (like an undecodable log) still claims the log's run, as a
	// run that fails at once (store.Claim.TriggerError).
	Where func(event map[string]any) (bool, error)
	// Generation is the workflow generation the trigger was built from
	// (Config.Reload sets it); the task commits only while it is current.
	Generation int64
}

// BlockTrigger claims a run every Every blocks (block numbers divisible by
// Every), keyed by the block number.
type BlockTrigger struct {
	Workflow string
	Network  string
	Every    uint64
	// Confirmations is the depth at which a block fires (default 0).
	Confirmations int
	// RunOn is RunOnHead (or empty: at Confirmations depth), RunOnSafe or
	// RunOnFinalized (a block fires once the node's tag block reaches it).
	RunOn RunOn
	// Generation is the workflow generation the trigger was built from
	// (Config.Reload sets it); the task commits only while it is current.
	Generation int64
}

// ReadTrigger calls a view function and claims a run with its result, either
// every EveryBlocks blocks (key: block number) or every Interval (key: the
// poll instant, RFC 3339 UTC, aligned to the interval).
type ReadTrigger struct {
	Workflow string
	Network  string
	Address  common.Address
	Method   abi.Method
	Args     []any
	// Calldata, when set, is the call's input (selector included), already
	// encoded; Args is then ignored. Method still decodes the result.
	Calldata    []byte
	EveryBlocks uint64
	Interval    time.Duration
	// Confirmations is the depth of the block read at (default 0).
	Confirmations int
	// When, when set, filters results before claiming; an error claims a
	// run that fails at once, as Where's does.
	When func(result any) (bool, error)
	// Generation is the workflow generation the trigger was built from
	// (Config.Reload sets it); the task commits only while it is current.
	Generation int64
}

// Reorg is handed to the OnReorg hook inside the transaction that records
// it: the runs whose triggering log or block left the canonical chain.
type Reorg struct {
	ChainID      int64
	ForkBlock    int64
	Depth        int
	OrphanedRuns []uuid.UUID
	// OldHash is the replaced block's hash at ForkBlock, NewHash the
	// canonical one now ("" when the chain is shorter); for a replaced
	// chain, the old and new genesis hashes.
	OldHash, NewHash string
}

// Config is what a Service runs.
type Config struct {
	// Owner identifies this process in leases (default: hostname, pid and a
	// random suffix).
	Owner string
	// LeasePrefix namespaces lease names (e.g. the project name; a "/" is
	// added): leases are <prefix>/head/<chain id>, <prefix>/event/<workflow>,
	// <prefix>/block/…, <prefix>/read/…, <prefix>/wait/<chain id>/<address>/<topic>,
	// and <prefix>/node/<owner> per process.
	LeasePrefix string
	// Namespace is the project's share of the database: a wait feed
	// follows the waits of its runs only, under a cursor of its own (two
	// projects waiting on one contract each read its logs for their own
	// runs), and the zero value, the home project's, keeps the cursor
	// names of a single-project database.
	Namespace store.Namespace
	// LeaseTTL is how long a dead process keeps its tasks (default 15s).
	LeaseTTL time.Duration
	// ClaimBatch is the claims per Claimer call (default 500).
	ClaimBatch int

	Networks []Network
	Events   []EventTrigger
	Blocks   []BlockTrigger
	Reads    []ReadTrigger
	// Waits are the wait-only subscriptions (Triggers.Waits with Reload);
	// Matcher gets their deliveries.
	Waits   []WaitFeed
	Matcher WaitMatcher

	// OnReorg is called in the reorg's transaction; an error rolls the
	// reorg back and it is retried.
	OnReorg func(ctx context.Context, tx pgx.Tx, r Reorg) error

	// Reload, when set, returns the triggers to run (Events, Blocks, Reads
	// and Waits above are then ignored), and is polled every ReloadInterval
	// (default 1s) while Run runs: a changed set takes effect without a
	// restart (see Triggers). A network's head is then tracked only while
	// a trigger uses it.
	Reload         func(ctx context.Context) (Triggers, error)
	ReloadInterval time.Duration
}

func confirmationsOf(t EventTrigger, n Network) int {
	if t.Confirmations != nil {
		return *t.Confirmations
	}
	return n.Confirmations
}

func (t EventTrigger) phases() ([]Phase, error) {
	switch t.RunOn {
	case "", RunOnConfirmed:
		return []Phase{PhaseConfirmed}, nil
	case RunOnHead:
		return []Phase{PhaseHead}, nil
	case RunOnBoth:
		return []Phase{PhaseHead, PhaseConfirmed}, nil
	case RunOnSafe:
		return []Phase{PhaseSafe}, nil
	case RunOnFinalized:
		return []Phase{PhaseFinalized}, nil
	}
	return nil, fmt.Errorf("event trigger %s: run_on %q: want head, confirmed, both, safe or finalized", t.Workflow, t.RunOn)
}

// TaskName is the ingestion task (lease and cursor name) of a workflow's
// chain trigger of kind event, block or read.
func TaskName(kind, workflow string) string { return kind + "/" + workflow }
