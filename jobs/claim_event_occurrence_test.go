package jobs_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/jobs"
)

// TestEventOccurrenceTxLogIndex: an occurrence fired by hand (`rflow run
// --event`, workflow tests) may set its log's position in its transaction,
// which its key is made of; unset it is 0. A bad value names the field.
func TestEventOccurrenceTxLogIndex(t *testing.T) {
	t.Parallel()
	p := chainProject(t, `
name: occ
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1" }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3" }
workflows:
  - name: w
    trigger: { event: { contract: Vault, event: Deposit } }
    steps:
      - { id: a, noop: {} }
`, os.LookupEnv)
	wf := p.Workflow("w")
	fields := map[string]any{"sender": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "amount": json.Number("5"),
		"log_index": json.Number("7"), "tx_log_index": json.Number("2")}
	d, l, err := jobs.EventOccurrence(p, wf, fields, types.Log{})
	require.NoError(t, err)
	require.Equal(t, uint(2), d.TxLogIndex)
	require.Equal(t, uint(7), d.LogIndex)
	require.Equal(t, "31337:"+l.TxHash.Hex()+":tx2", chain.EventKey(31337, l.TxHash, d.TxLogIndex, chain.PhaseConfirmed, false))
	require.EqualValues(t, 2, d.Fields()["tx_log_index"])

	delete(fields, "tx_log_index")
	d, _, err = jobs.EventOccurrence(p, wf, fields, types.Log{})
	require.NoError(t, err)
	require.Zero(t, d.TxLogIndex)

	fields["tx_log_index"] = "-1"
	_, _, err = jobs.EventOccurrence(p, wf, fields, types.Log{})
	var fe *jobs.EventFieldError
	require.True(t, errors.As(err, &fe), "%v", err)
	require.Equal(t, "tx_log_index", fe.Field)
}
