package ozimport

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Network is one networks/*.json file.
type Network struct {
	File               string          `json:"-"`
	NetworkType        string          `json:"network_type"`
	Slug               string          `json:"slug"`
	Name               string          `json:"name"`
	RPCURLs            []RPCURL        `json:"rpc_urls"`
	ChainID            *uint64         `json:"chain_id"`
	NetworkPassphrase  string          `json:"network_passphrase"`
	BlockTimeMS        *uint64         `json:"block_time_ms"`
	ConfirmationBlocks *uint64         `json:"confirmation_blocks"`
	CronSchedule       string          `json:"cron_schedule"`
	MaxPastBlocks      json.RawMessage `json:"max_past_blocks"`
	StoreBlocks        *bool           `json:"store_blocks"`
	RecoveryConfig     json.RawMessage `json:"recovery_config"`
}

// RPCURL is one entry of a network's rpc_urls.
type RPCURL struct {
	Type   string      `json:"type_"`
	URL    SecretValue `json:"url"`
	Weight uint32      `json:"weight"`
}

func parseNetwork(rel string, data []byte) (*Network, error) {
	n := &Network{File: rel}
	if err := decodeStrict(rel, "", data, n); err != nil {
		return nil, err
	}
	switch {
	case n.Slug == "":
		return nil, &InputError{File: rel, Field: "slug", Msg: "missing: every network needs a unique slug"}
	case n.NetworkType == "":
		return nil, &InputError{File: rel, Field: "network_type", Msg: "missing: want EVM, Stellar, Solana or Midnight"}
	}
	if !n.isEVM() {
		return n, nil
	}
	if n.ChainID == nil {
		return nil, &InputError{File: rel, Field: "chain_id", Msg: "missing: an EVM network needs its chain id"}
	}
	if len(n.RPCURLs) == 0 {
		return nil, &InputError{File: rel, Field: "rpc_urls", Msg: "missing: an EVM network needs at least one RPC URL"}
	}
	for i, u := range n.RPCURLs {
		if _, err := u.URL.kind(); err != nil {
			return nil, &InputError{File: rel, Field: fmt.Sprintf("rpc_urls[%d].url", i), Msg: err.Error()}
		}
		if u.URL.Value == "" {
			return nil, &InputError{File: rel, Field: fmt.Sprintf("rpc_urls[%d].url.value", i), Msg: "missing"}
		}
	}
	if _, _, err := n.maxPastBlocks(); err != nil {
		return nil, &InputError{File: rel, Field: "max_past_blocks", Msg: err.Error()}
	}
	return n, nil
}

func (n *Network) isEVM() bool { return strings.EqualFold(n.NetworkType, "evm") }

// maxPastBlocks reads max_past_blocks: a number, "unlimited", or absent.
func (n *Network) maxPastBlocks() (v uint64, set bool, err error) {
	raw := strings.TrimSpace(string(n.MaxPastBlocks))
	if raw == "" || raw == "null" {
		return 0, false, nil
	}
	var s string
	if json.Unmarshal(n.MaxPastBlocks, &s) == nil {
		if strings.EqualFold(s, "unlimited") {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("%q: want a number or \"unlimited\"", s)
	}
	v, err = strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s: want a number or \"unlimited\"", raw)
	}
	return v, true, nil
}

// networkName is the rflow network name for a Monitor slug.
func networkName(slug string) string { return rflowName(slug) }

// startBlockVar names the variable that sets where a network's contracts
// start: Monitor resumes from the block in data/<slug>_last_block.txt, a
// state rflow does not read, so the operator chooses.
func startBlockVar(n *Network) string { return "START_BLOCK_" + envName(n.Slug) }

// isDevChain reports chain ids of local development nodes (anvil, hardhat,
// geth --dev), where starting from block 0 is harmless.
func isDevChain(id uint64) bool { return id == 31337 || id == 1337 }

// convertNetwork maps an EVM network to rflow's networks: entry.
func (b *builder) convertNetwork(n *Network) ymap {
	src := fmt.Sprintf("From %s (Monitor network %q, %s).", n.File, n.Slug, n.Name)
	m := ymap{}.add("name", networkName(n.Slug), "").
		add("chain_id", *n.ChainID, "")

	// rpc_urls in weight order, heaviest first: rflow fails over in list
	// order rather than balancing by weight.
	urls := append([]RPCURL(nil), n.RPCURLs...)
	sort.SliceStable(urls, func(i, j int) bool { return urls[i].Weight > urls[j].Weight })
	var rpc ylist
	var weights []string
	for i, u := range urls {
		if t := strings.ToLower(u.Type); t != "" && t != "rpc" {
			b.note(n.File, "", fmt.Sprintf("network %s: rpc_urls entry of type_ %q", n.Slug, u.Type),
				"rflow reads every rpc: entry as an HTTP(S) JSON-RPC endpoint (a ws:// URL goes under ws:); check this one", true)
			continue
		}
		v := b.secretRef(u.URL, n.File, fmt.Sprintf("RPC_%s_%d", envName(n.Slug), i+1),
			fmt.Sprintf("RPC URL %d of network %s", i+1, n.Slug), true)
		rpc = append(rpc, yitem{val: v})
		weights = append(weights, strconv.FormatUint(uint64(u.Weight), 10))
	}
	rpcComment := ""
	if len(rpc) > 1 {
		rpcComment = fmt.Sprintf("Monitor's rpc_urls, heaviest weight first (%s): rflow uses the first\nand fails over down the list; it does not spread load by weight.", strings.Join(weights, ", "))
	}
	m = m.add("rpc", rpc, rpcComment)
	if n.ConfirmationBlocks != nil {
		m = m.add("confirmations", *n.ConfirmationBlocks,
			"confirmation_blocks: Monitor reads up to head - confirmation_blocks, as rflow does.")
	}
	if n.BlockTimeMS != nil && *n.BlockTimeMS > 0 {
		d := time.Duration(*n.BlockTimeMS) * time.Millisecond
		m = m.add("block_poll_interval", d.String(),
			"block_time_ms: rflow polls the head once per block time (Monitor polled on cron_schedule).")
	}
	if v, set, _ := n.maxPastBlocks(); set && v > 0 {
		m = m.add("max_block_range", min(v, 10000),
			"max_past_blocks: the most blocks read per eth_getLogs. Unlike Monitor, rflow never\nskips blocks when it falls behind; it reads them all in ranges of this size.")
	}
	if n.CronSchedule != "" {
		b.note(n.File, "", fmt.Sprintf("network %s: cron_schedule %q", n.Slug, n.CronSchedule),
			"not needed: rflow follows the head continuously (block_poll_interval)", false)
	}
	if len(n.RecoveryConfig) > 0 && string(n.RecoveryConfig) != "null" {
		b.note(n.File, "", fmt.Sprintf("network %s: recovery_config", n.Slug),
			"not needed: rflow's cursors never skip a block, and a range that fails is read again", false)
	}
	if n.StoreBlocks != nil && *n.StoreBlocks {
		b.note(n.File, "", fmt.Sprintf("network %s: store_blocks", n.Slug),
			"not carried over: rflow keeps its block window and every run in Postgres, not block files", false)
	}
	return append(ymap{{key: "name", val: m[0].val, comment: src}}, m[1:]...)
}
