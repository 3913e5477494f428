package jobs

import "github.com/rflow-dev/rflow/relayer"

// sendRetryable reports whether a failed send may get another attempt under
// the step's retry: policy. Only a known failure that cannot have moved
// value is retried: a send refused before it left the wallet (a revert in
// simulation, insufficient funds, a rejection by the node) or one mined and
// reverted. A send a node once accepted and then lost fails the run instead,
// since its bytes may still be mined. The next attempt is a new send, keyed
// by the new attempt number.
func sendRetryable(t *relayer.Transaction) bool {
	mined := t.ReceiptStatus != nil
	return t.Status == relayer.StatusFailed && !(t.Accepted && !mined)
}
