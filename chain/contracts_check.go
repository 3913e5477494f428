package chain

import (
	"context"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// ContractRef is a contract rflow.yaml declares: its name, network and
// address.
type ContractRef struct {
	Name    string
	Network string
	Address common.Address
}

// CheckContracts warns about each contract that holds no code at its
// network's head: its events never arrive and its reads fail until one is
// deployed there, which at start is most often a wrong address or network
// in rflow.yaml. A warning, not an error: the contract may be deployed
// later. A node that does not answer is skipped (CheckNetworks says so).
func (s *Service) CheckContracts(ctx context.Context, contracts []ContractRef) {
	for _, c := range contracts {
		n := s.nets[c.Network]
		if n == nil {
			continue // a network no trigger reads
		}
		var code hexutil.Bytes
		if err := n.client.callAt(ctx, 0, &code, "eth_getCode", c.Address, "latest"); err != nil || len(code) > 0 {
			continue
		}
		s.log.Warn("contract has no code on its network: no events arrive from it until it is deployed there; "+
			"check its address and network in rflow.yaml", "contract", c.Name, "address", c.Address.Hex(),
			"network", c.Network, "chain_id", n.cfg.ChainID)
	}
}
