package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Durable command records: what a /v1 command made, kept with the resource
// it made it on, so a replay after the idempotency ledger forgot its key
// finds it instead of acting again.

// DeployCommand is the durable record of one deploy command: which
// Idempotency-Key deployed which request to a workflow, and what it left.
// It outlives the idempotency ledger, so a replay after the ledger forgot
// the key still answers with the generation it made.
type DeployCommand struct {
	Workflow    string
	Key         string
	RequestHash string
	Deployed    Deployed
}

// DeployByCommand returns the deploy command recorded for key on workflow,
// or ErrNotFound.
func DeployByCommand(ctx context.Context, db DBTX, workflow, key string) (*DeployCommand, error) {
	d := DeployCommand{Workflow: workflow, Key: key, Deployed: Deployed{Name: workflow}}
	err := db.QueryRow(ctx, `
		SELECT request_hash, generation, changed, previous_generation, same_spec_as FROM rflow.workflow_deploys
		WHERE workflow_name = $1 AND command_key = $2`, workflow, key).
		Scan(&d.RequestHash, &d.Deployed.Generation, &d.Deployed.Changed, &d.Deployed.Previous, &d.Deployed.SameAs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("deploy of %s with key %s: %w", workflow, key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("deploy of %s with key %s: %w", workflow, key, err)
	}
	return &d, nil
}

// RecordDeployCommand stores d in tx, the transaction of the deploy itself.
func RecordDeployCommand(ctx context.Context, tx pgx.Tx, d DeployCommand) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO rflow.workflow_deploys (workflow_name, command_key, request_hash, generation, changed,
			previous_generation, same_spec_as)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, d.Workflow, d.Key, d.RequestHash, d.Deployed.Generation, d.Deployed.Changed,
		d.Deployed.Previous, d.Deployed.SameAs)
	if err != nil {
		return fmt.Errorf("record deploy of %s with key %s: %w", d.Workflow, d.Key, err)
	}
	return nil
}

// RetryCommand is the durable record of one retry command: which
// Idempotency-Key retried a run, with which request, into which attempt.
type RetryCommand struct {
	RunID       uuid.UUID
	Key         string
	RequestHash string
	Attempt     int
}

// RetryByCommand returns the retry recorded for key on run id, or
// ErrNotFound.
func RetryByCommand(ctx context.Context, db DBTX, id uuid.UUID, key string) (*RetryCommand, error) {
	r := RetryCommand{RunID: id, Key: key}
	err := db.QueryRow(ctx, `
		SELECT request_hash, attempt FROM rflow.run_retries WHERE run_id = $1 AND command_key = $2`,
		id, key).Scan(&r.RequestHash, &r.Attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("retry of run %s with key %s: %w", id, key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("retry of run %s with key %s: %w", id, key, err)
	}
	return &r, nil
}

// RecordRetryCommand stores r in tx, the transaction of the retry itself.
func RecordRetryCommand(ctx context.Context, tx pgx.Tx, r RetryCommand) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO rflow.run_retries (run_id, command_key, request_hash, attempt) VALUES ($1, $2, $3, $4)`,
		r.RunID, r.Key, r.RequestHash, r.Attempt)
	if err != nil {
		return fmt.Errorf("record retry of run %s with key %s: %w", r.RunID, r.Key, err)
	}
	return nil
}
