package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/rivertype"

	"github.com/rflow-dev/rflow/budgets"
	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/relayer"
	"github.com/rflow-dev/rflow/workflow"
)

// DialBackends prepares the relayer's connection to each of the project's
// networks, by chain id, for Config.Backends: a chain.Client that fails over
// along the network's rpc: list. HTTP nodes are not contacted until the
// first send. It returns nil when the project has no wallets (nothing to
// send). Call release once the engine has stopped.
func DialBackends(ctx context.Context, p *workflow.Project, logger *slog.Logger) (map[uint64]relayer.Backend, func(), error) {
	var clients []*chain.Client
	release := func() {
		for _, c := range clients {
			c.Close()
		}
	}
	if len(p.Wallets) == 0 {
		return nil, release, nil
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	backends := map[uint64]relayer.Backend{}
	for _, n := range p.Networks {
		if len(n.RPC) == 0 {
			continue
		}
		c, err := chain.Dial(ctx, chain.ClientOptions{URLs: n.RPC, Logger: logger.With("network", n.Name)})
		if err != nil {
			release()
			return nil, func() {}, fmt.Errorf("network %s: %w", n.Name, err)
		}
		clients = append(clients, c)
		backends[n.ChainID] = c.Eth()
	}
	return backends, release, nil
}

// newRelayer builds the embedded relayer for the project's wallets on the
// caller's backends, its jobs in queue, with onFinal resuming the runs parked on its sends and
// fault at its crash points. It does no network I/O.
func newRelayer(pool *pgxpool.Pool, p *workflow.Project, cfg Config, queue string, adopt, ours func(context.Context, pgx.Tx, string) (bool, error),
	onFinal relayer.FinalHook, fault func(string), middleware []rivertype.Middleware) (*relayer.Relayer, error) {
	wallets := map[string]*relayer.Wallet{}
	for _, w := range p.Wallets {
		var rw *relayer.Wallet
		var err error
		if w.Keystore != "" {
			rw, err = relayer.WalletFromKeystore(w.Keystore, w.Password.Reveal())
		} else {
			rw, err = relayer.WalletFromKey(w.PrivateKey.Reveal())
		}
		if err != nil {
			return nil, fmt.Errorf("wallet %s: %w", w.Name, err)
		}
		rw.MaxFee, rw.MaxPriorityFee = w.MaxFee, w.MaxPriorityFee
		wallets[w.Name] = rw
	}
	return relayer.New(relayer.Config{Pool: pool, Logger: cfg.Logger, Wallets: wallets, Networks: cfg.Backends,
		OnFinal: onFinal, LockOwner: lockSendOwner, OnRefused: budgets.Refused, Admit: admitSend, Fault: fault, PollInterval: cfg.SendPollInterval, Middleware: middleware, Queue: queue, Adopt: adopt, Ours: ours})
}

// admitSend is the relayer's gate before a send's bytes reach a node again
// after a refusal released its budget (budgets.Refused): it takes the
// reservation back within the cap, or withholds the send when the budget
// no longer fits it (another send used what the refusal freed).
func admitSend(ctx context.Context, tx pgx.Tx, externalID string) (bool, error) {
	reclaimed, err := budgets.Reclaim(ctx, tx, externalID)
	if ex := (*budgets.ExceededError)(nil); errors.As(err, &ex) {
		return false, &relayer.Withhold{Reason: ex.Error()}
	}
	return reclaimed, err
}
