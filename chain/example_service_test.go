package chain_test

import (
	"context"
	"log"
	"math/big"
	"os"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/store"
)

// claimGate is the smallest Claimer: runs without first step jobs. The
// engine's Claimer also enqueues each new run's first step in tx.
type claimGate struct{}

func (claimGate) ClaimTx(ctx context.Context, tx pgx.Tx, claims []store.Claim) (int, error) {
	runs, err := store.ClaimRuns(ctx, tx, claims)
	return len(runs), err
}

// A Service claiming a run for every confirmed Deposit of at least 1 ether,
// and a wait-only subscription to Claimed logs two blocks deep.
func ExampleService() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	abiJSON, err := os.ReadFile("testdata/contracts/Emitter.abi.json")
	if err != nil {
		log.Fatal(err)
	}
	deposit, err := chain.ParseEvent(abiJSON, "Deposit")
	if err != nil {
		log.Fatal(err)
	}
	claimed, err := chain.ParseEvent(abiJSON, "Claimed")
	if err != nil {
		log.Fatal(err)
	}
	vault := common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")
	oneEther := new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)

	svc, err := chain.NewService(ctx, pool, claimGate{}, chain.Config{
		LeasePrefix: "vault-ops",
		Networks: []chain.Network{{Name: "local", ChainID: 31337, RPC: []string{"http://127.0.0.1:8545"},
			Confirmations: 2}},
		Events: []chain.EventTrigger{{
			Workflow: "refund-large-deposits", Network: "local", Event: deposit,
			Addresses: []common.Address{vault}, RunOn: chain.RunOnConfirmed,
			Where: func(event map[string]any) (bool, error) {
				return event["amount"].(*big.Int).Cmp(oneEther) >= 0, nil
			},
		}},
		OnReorg: func(ctx context.Context, tx pgx.Tx, r chain.Reorg) error {
			log.Printf("reorg at %d orphaned %d run(s)", r.ForkBlock, len(r.OrphanedRuns))
			return nil
		},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer svc.Close()

	err = svc.Subscribe(ctx, chain.Subscription{ChainID: 31337, Address: vault, Event: claimed, Depth: 2,
		Deliver: func(ctx context.Context, d chain.Decoded) error {
			log.Printf("claimed by %s: %s", d.Args["user"], d.Args["amount"])
			return nil
		}})
	if err != nil {
		log.Fatal(err)
	}
	if err := svc.Run(ctx); err != nil { // until ctx ends
		log.Fatal(err)
	}
}
