package relayer

import "github.com/rflow-dev/rflow/chain"

// What rflow passes as a Backend reports the node's own block hashes, so
// the canonical check never compares a hash go-ethereum re-encoded.
var _ interface {
	Backend
	blockHasher
} = (*chain.Eth)(nil)
