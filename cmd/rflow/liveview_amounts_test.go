package main

import (
	"bytes"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/store"
)

// TestDevViewAmounts: the live view shows what a send moved, and the dev
// chain's deposits, exactly in their unit with the wei beside them (no
// rounding to four places).
func TestDevViewAmounts(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	run := &store.Run{ID: id, Workflow: "refund", CreatedAt: at}
	hash := "0x" + strings.Repeat("ab", 32)
	sent := &store.StepRun{RunID: id, Key: "pay", Kind: "send", Status: store.StepCompleted, CreatedAt: at, FinishedAt: &at,
		Output: []byte(`{"hash":"` + hash + `","status":"confirmed","value":29200000000000000,"value_text":"0.0292 ETH (29200000000000000 wei)"}`)}
	free := &store.StepRun{RunID: id, Key: "poke", Kind: "send", Status: store.StepCompleted, CreatedAt: at, FinishedAt: &at,
		Output: []byte(`{"hash":"` + hash + `","status":"confirmed","value":0,"value_text":"0 ETH"}`)}

	var plain bytes.Buffer
	v := newDevView(&plain)
	v.step(run, sent)
	v.step(run, free)
	v.deposit(common.Hash{}, big.NewInt(1_234_567_891_234_567_891))
	lines := strings.Split(strings.TrimSpace(plain.String()), "\n")
	require.Len(t, lines, 3)
	require.True(t, strings.HasSuffix(lines[0], ` tx=`+hash+` value="0.0292 ETH (29200000000000000 wei)"`), lines[0])
	require.NotContains(t, lines[1], "value=", "a zero value says nothing")
	require.Contains(t, lines[2], `deposit amount="1.234567891234567891 ETH (1234567891234567891 wei)"`)

	var tidy bytes.Buffer
	v = &devView{w: &tidy, tty: true}
	v.step(run, sent)
	require.Contains(t, tidy.String(), "0.0292 ETH (29200000000000000 wei)")
}
