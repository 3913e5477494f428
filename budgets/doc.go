// Package budgets enforces spend budgets: a cap on what a workflow's sends
// may move of one asset inside a rolling window (seed 000, "Durable spend
// budgets survive restarts and races").
//
// A send under a budget reserves its amount right before the relayer call,
// in the transaction that queues the send, under the budget's row lock
// (Reserve); the reservation is keyed by the send's external id, so a re-run
// of the attempt finds the same row. The relayer's final state settles it
// (Finish): confirmed stays spent, anything that moved no value is released.
// A node's refusal that proves nothing of the send is out there releases it
// at once (Refused); the relayer takes it back within the cap before the
// send's bytes go out again (Reclaim), so a send is counted once.
// Reconcile, run by the recovery pass, settles what a crash left behind.
package budgets
