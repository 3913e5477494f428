package chain_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
)

// silentListener accepts connections and never answers on them.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				<-done
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { l.Close(); close(done) })
	return "http://" + l.Addr().String()
}

// CheckNetworks asks every URL at once: a URL that never answers costs
// about probeGrace, not a call timeout; the URLs that answered come first,
// in their configured order; a node of another chain is an error naming
// the network and both chain ids.
func TestCheckNetworksOrdersAnsweringURLsFirst(t *testing.T) {
	t.Parallel()
	a := anviltest.Start(t, anviltest.Options{})
	b := anviltest.Start(t, anviltest.Options{})
	silent, refused := silentListener(t), "http://"+anviltest.DeadAddr(t)
	ctx := context.Background()

	began := time.Now()
	out, err := chain.CheckNetworks(ctx, []chain.Network{network(silent, a.URL, refused, b.URL)}, nil, testLogger(t))
	require.NoError(t, err)
	require.Less(t, time.Since(began), 5*time.Second, "waited on the URL that never answers")
	require.Equal(t, []string{a.URL, b.URL, silent, refused}, out[0].RPC)

	other := anviltest.Start(t, anviltest.Options{ChainID: 5})
	_, err = chain.CheckNetworks(ctx, []chain.Network{network(a.URL, other.URL)}, nil, testLogger(t))
	require.ErrorContains(t, err, "network local: rflow.yaml says chain_id 31337, but the node at "+other.URL+" reports chain id 5")
}
