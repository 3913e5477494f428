package workflow

import (
	"github.com/rflow-dev/rflow/units"
)

// maxSymbolLen bounds a currency or token symbol: it is printed in every
// amount, so it stays a ticker, not a sentence.
const maxSymbolLen = 16

// unitSpec reads a { symbol, decimals } mapping (a network's currency:, a
// contract's token:); both keys are required, so nothing is guessed.
func (l *loader) unitSpec(n *node, what string) (symbol string, decimals int, ok bool) {
	m := l.fields(n, what, "symbol", "decimals")
	if m == nil {
		return "", 0, false
	}
	ok = true
	if v := l.required(m, n, "symbol", what); v != nil {
		symbol = l.str(v, what+" symbol")
		if symbol == "" || len(symbol) > maxSymbolLen {
			l.errorf(v.pos, "%s symbol must be 1 to %d characters, like ETH or USDC", what, maxSymbolLen)
			ok = false
		}
	} else {
		ok = false
	}
	if v := l.required(m, n, "decimals", what); v != nil {
		d, good := l.integer(v, what+" decimals", 0, units.MaxDecimals)
		decimals, ok = int(d), ok && good
	} else {
		ok = false
	}
	return symbol, decimals, ok
}

// networkCurrency reads a network's currency:, the unit its native amounts
// (send values, native budgets) are shown in; absent, ETH with 18 decimals.
func (l *loader) networkCurrency(n *node, net *Network) {
	net.Currency = units.Ether()
	if n.isNull() {
		return
	}
	if sym, dec, ok := l.unitSpec(n, "network "+net.Name+": currency"); ok {
		net.Currency = units.Native(sym, dec)
	}
}

// contractToken reads a contract's token:, the unit of the ERC-20 amounts
// it moves (budgets on it, its transfer arguments in approvals).
func (l *loader) contractToken(n *node, c *Contract) {
	if n.isNull() {
		return
	}
	if sym, dec, ok := l.unitSpec(n, "contract "+c.Name+": token"); ok {
		u := units.Token(sym, dec)
		c.Token = &u
	}
}

// NativeUnit is the currency of network name: its currency:, ETH when it
// declares none or there is no such network. An empty name is the
// project's only network.
func (p *Project) NativeUnit(name string) units.Unit {
	n := p.Network(name)
	if n == nil && name == "" && len(p.Networks) == 1 {
		n = p.Networks[0]
	}
	if n == nil || !n.Currency.Known() {
		return units.Ether()
	}
	return n.Currency
}

// AssetUnit is the unit amounts of asset are shown in: the currency of
// network for "native", else the token: of the contract called asset
// (its decimals unknown when the project file declares none).
func (p *Project) AssetUnit(asset, network string) units.Unit {
	if asset == "native" {
		return p.NativeUnit(network)
	}
	if c := p.Contract(asset); c != nil && c.Token != nil {
		return *c.Token
	}
	return units.Unknown(asset)
}

// budgetUnits sets the unit of each budget of w: a native budget counts in
// the currency of the network its sends go to (the first such send's, in
// step order; the project's only network when no send names it yet).
func (l *loader) budgetUnits(w *Workflow) {
	for i := range w.Budgets {
		b := &w.Budgets[i]
		network := ""
		walkSteps(w.allLists(), func(s *Step) {
			if network == "" && s.Kind == StepSend && s.Send != nil && s.Send.Budget == b.Name {
				network = s.Send.Network
			}
		})
		b.Unit = l.p.AssetUnit(b.Asset, network)
	}
}

// ChainUnit is the currency of the network with chainID: where only the
// chain id is at hand (a relayer transaction). ETH when no network has it.
func (p *Project) ChainUnit(chainID uint64) units.Unit {
	for _, n := range p.Networks {
		if n.ChainID == chainID && n.Currency.Known() {
			return n.Currency
		}
	}
	return units.Ether()
}
