package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/rflow-dev/rflow/redact"
)

// Probing at start: every URL is asked at once, each for at most
// probeTimeout. Once every network has a URL that answered, the others get
// probeGrace more: a URL that accepts connections and never answers costs
// start-up that, not a call timeout per check.
const (
	probeTimeout = 10 * time.Second
	probeGrace   = time.Second
)

// ContractRef is a contract rflow.yaml declares: its name, network and
// address.
type ContractRef struct {
	Name    string
	Network string
	Address common.Address
}

// probe is one URL's answer to eth_chainId.
type probe struct {
	net, url int
	id       int64
	err      error
	client   *Client
}

// CheckNetworks asks every RPC URL of every network for its chain id, all
// at once, before anything is written to the database, and returns nets
// with each rpc list reordered: the URLs that answered first (in their
// configured order), then the others, so that no client starts on a URL
// that does not answer. A node that answers with another chain id than
// rflow.yaml's chain_id is a configuration error that no retry heals (and
// a failover to it would read another chain into the window):
// CheckNetworks returns it, naming the network, both chain ids and what to
// change; `rflow start` then exits 1. A URL that does not answer is not a
// configuration error (the node may come back): it is logged, and
// ingestion keeps retrying it. Then it warns about each contract with no
// code at its network's head (see checkContracts).
func CheckNetworks(ctx context.Context, nets []Network, contracts []ContractRef, logger *slog.Logger) ([]Network, error) {
	if logger == nil {
		logger = slog.Default()
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	total := 0
	for _, n := range nets {
		total += len(n.RPC)
	}
	results := make(chan probe, total)
	for ni, n := range nets {
		for ui, u := range n.RPC {
			go func() { results <- probeURL(pctx, ni, ui, u) }()
		}
	}
	answers, err := collectProbes(ctx, nets, results, total)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, a := range answers {
			for _, p := range a {
				if p != nil && p.client != nil {
					p.client.Close()
				}
			}
		}
	}()
	out := slices.Clone(nets)
	healthy := map[string]*Client{}
	var errs []error
	for ni, n := range nets {
		var good, rest []string
		for ui, u := range n.RPC {
			p := answers[ni][ui]
			switch {
			case p == nil:
				logger.Warn("RPC URL does not answer at start (no reply yet); it is tried after the URLs that did, and ingestion retries it",
					"network", n.Name, "url", redact.URL(u))
			case p.err != nil:
				logger.Warn("RPC URL does not answer at start; ingestion retries it", "network", n.Name,
					"url", redact.URL(u), "err", redact.Error(p.err))
			case p.id != n.ChainID:
				errs = append(errs, fmt.Errorf("network %s: rflow.yaml says chain_id %d, but the node at %s reports chain id %d: "+
					"set chain_id: %d for network %s, or point its rpc at a node of chain %d",
					n.Name, n.ChainID, redact.URL(u), p.id, p.id, n.Name, n.ChainID))
			default:
				good = append(good, u)
				if healthy[n.Name] == nil {
					healthy[n.Name] = p.client
				}
				continue
			}
			rest = append(rest, u)
		}
		out[ni].RPC = append(good, rest...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	checkContracts(ctx, healthy, nets, contracts, logger)
	return out, nil
}

// probeURL asks u alone for its chain id, in one attempt.
func probeURL(ctx context.Context, ni, ui int, u string) probe {
	p := probe{net: ni, url: ui}
	p.client, p.err = Dial(ctx, ClientOptions{URLs: []string{u}, Timeout: probeTimeout, Logger: slog.New(slog.DiscardHandler)})
	if p.err == nil {
		p.id, p.err = p.client.chainIDAt(ctx, 0)
	}
	return p
}

// collectProbes gathers the answers (by network, then URL; nil: none in
// time) until all are in, or every network has an answering URL and
// probeGrace has passed since the last one got it, or probeTimeout.
// Answers that come later are closed as they arrive.
func collectProbes(ctx context.Context, nets []Network, results <-chan probe, total int) ([][]*probe, error) {
	answers := make([][]*probe, len(nets))
	for i, n := range nets {
		answers[i] = make([]*probe, len(n.RPC))
	}
	answered := make([]bool, len(nets))
	waiting := len(nets)
	timeout := time.NewTimer(probeTimeout)
	defer timeout.Stop()
	var grace <-chan time.Time
	got := 0
	defer func() {
		go func() { // close what arrives after we stopped listening
			for ; got < total; got++ {
				if p := <-results; p.client != nil {
					p.client.Close()
				}
			}
		}()
	}()
	for got < total {
		select {
		case <-ctx.Done():
			return answers, ctx.Err()
		case <-timeout.C:
			return answers, nil
		case <-grace:
			return answers, nil
		case p := <-results:
			got++
			answers[p.net][p.url] = &p
			if p.err == nil && !answered[p.net] {
				answered[p.net] = true
				if waiting--; waiting == 0 {
					grace = time.After(probeGrace)
				}
			}
		}
	}
	return answers, nil
}

// checkContracts warns about each contract that holds no code at its
// network's head: its events never arrive and its reads fail until one is
// deployed there, which at start is most often a wrong address or network
// in rflow.yaml. A warning, not an error: the contract may be deployed
// later. Only networks with an answering URL are asked, all at once.
func checkContracts(ctx context.Context, healthy map[string]*Client, nets []Network, contracts []ContractRef, logger *slog.Logger) {
	var wg sync.WaitGroup
	for _, c := range contracts {
		client := healthy[c.Network]
		i := slices.IndexFunc(nets, func(n Network) bool { return n.Name == c.Network })
		if client == nil || i < 0 {
			continue // a network that does not answer, or that no trigger reads
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var code hexutil.Bytes
			if err := client.callAt(ctx, 0, &code, "eth_getCode", c.Address, "latest"); err != nil || len(code) > 0 {
				return
			}
			logger.Warn("contract has no code on its network: no events arrive from it until it is deployed there; "+
				"check its address and network in rflow.yaml", "contract", c.Name, "address", c.Address.Hex(),
				"network", c.Network, "chain_id", nets[i].ChainID)
		}()
	}
	wg.Wait()
}
