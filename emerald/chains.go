package emerald

import (
	"slices"
	"strconv"
	"strings"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/remotes/status"
)

// refByChainID maps EVM chain ids to Dshackle's ChainRef codes, for the
// chains Dshackle names that have one. A chain's grpc_id overrides it
// (a devnet, a chain Dshackle does not list).
var refByChainID = map[uint64]pb.ChainRef{
	1:          pb.ChainRef_CHAIN_ETHEREUM__MAINNET,
	61:         pb.ChainRef_CHAIN_ETHEREUM_CLASSIC__MAINNET,
	250:        pb.ChainRef_CHAIN_FANTOM__MAINNET,
	137:        pb.ChainRef_CHAIN_POLYGON_POS__MAINNET,
	30:         pb.ChainRef_CHAIN_ROOTSTOCK__MAINNET,
	42161:      pb.ChainRef_CHAIN_ARBITRUM__MAINNET,
	10:         pb.ChainRef_CHAIN_OPTIMISM__MAINNET,
	56:         pb.ChainRef_CHAIN_BSC__MAINNET,
	1101:       pb.ChainRef_CHAIN_POLYGON_ZKEVM__MAINNET,
	42170:      pb.ChainRef_CHAIN_ARBITRUM_NOVA__MAINNET,
	324:        pb.ChainRef_CHAIN_ZKSYNC__MAINNET,
	8453:       pb.ChainRef_CHAIN_BASE__MAINNET,
	59144:      pb.ChainRef_CHAIN_LINEA__MAINNET,
	100:        pb.ChainRef_CHAIN_GNOSIS__MAINNET,
	43114:      pb.ChainRef_CHAIN_AVALANCHE__MAINNET,
	1313161554: pb.ChainRef_CHAIN_AURORA__MAINNET,
	534352:     pb.ChainRef_CHAIN_SCROLL__MAINNET,
	5000:       pb.ChainRef_CHAIN_MANTLE__MAINNET,
	8217:       pb.ChainRef_CHAIN_KLAYTN__MAINNET,
	42220:      pb.ChainRef_CHAIN_CELO__MAINNET,
	1284:       pb.ChainRef_CHAIN_MOONBEAM__MAINNET,
	1285:       pb.ChainRef_CHAIN_MOONBEAM__MOONRIVER,
	25:         pb.ChainRef_CHAIN_CRONOS__MAINNET,
	1088:       pb.ChainRef_CHAIN_METIS__MAINNET,
	204:        pb.ChainRef_CHAIN_OPBNB__MAINNET,
	2222:       pb.ChainRef_CHAIN_KAVA__MAINNET,
	592:        pb.ChainRef_CHAIN_ASTAR__MAINNET,
	122:        pb.ChainRef_CHAIN_FUSE__MAINNET,
	169:        pb.ChainRef_CHAIN_MANTA_PACIFIC__MAINNET,
	13371:      pb.ChainRef_CHAIN_IMMUTABLE_ZKEVM__MAINNET,
	7777777:    pb.ChainRef_CHAIN_ZORA__MAINNET,
	34443:      pb.ChainRef_CHAIN_MODE__MAINNET,
	2020:       pb.ChainRef_CHAIN_RONIN__MAINNET,
	7000:       pb.ChainRef_CHAIN_ZETA__MAINNET,
	1116:       pb.ChainRef_CHAIN_CORE__MAINNET,
	81457:      pb.ChainRef_CHAIN_BLAST__MAINNET,
	1135:       pb.ChainRef_CHAIN_LISK__MAINNET,
	167000:     pb.ChainRef_CHAIN_TAIKO_MAINNET,
	252:        pb.ChainRef_CHAIN_FRAXTAL__MAINNET,
	11155111:   pb.ChainRef_CHAIN_ETHEREUM__SEPOLIA,
	17000:      pb.ChainRef_CHAIN_ETHEREUM__HOLESKY,
	97:         pb.ChainRef_CHAIN_BSC__TESTNET,
	10200:      pb.ChainRef_CHAIN_GNOSIS__CHIADO,
	43113:      pb.ChainRef_CHAIN_AVALANCHE__FUJI,
	534351:     pb.ChainRef_CHAIN_SCROLL__SEPOLIA,
	11155420:   pb.ChainRef_CHAIN_OPTIMISM__SEPOLIA,
	84532:      pb.ChainRef_CHAIN_BASE__SEPOLIA,
	300:        pb.ChainRef_CHAIN_ZKSYNC__SEPOLIA,
	80002:      pb.ChainRef_CHAIN_POLYGON__AMOY,
	168587773:  pb.ChainRef_CHAIN_BLAST__SEPOLIA,
	421614:     pb.ChainRef_CHAIN_ARBITRUM__SEPOLIA,
	999999999:  pb.ChainRef_CHAIN_ZORA__SEPOLIA,
	59141:      pb.ChainRef_CHAIN_LINEA__SEPOLIA,
	5003:       pb.ChainRef_CHAIN_MANTLE__SEPOLIA,
}

// RefOf is the ChainRef a chain is served under: grpcID when set (a
// chain's grpc_id), else the table's code for chainID, else
// CHAIN_UNSPECIFIED (not served over gRPC).
func RefOf(chainID uint64, grpcID int32) pb.ChainRef {
	if grpcID != 0 {
		return pb.ChainRef(grpcID)
	}
	return refByChainID[chainID]
}

// Chain is one chain as the gRPC API sees it; the app builds the list
// from its chains at every call (Table), so that a reload's chains are
// served at once.
type Chain struct {
	Name    string
	ChainID uint64
	GRPCID  int32 // the chain's grpc_id; 0: by chain id
	// Remotes is the chain's remotes, in routing order (its pool's
	// status).
	Remotes func() []status.Remote
	// Ready reports whether the chain can serve calls (its pool's
	// readiness, as /readyz shows it).
	Ready func() bool
	// Head is the chain's head: its head window's, else its pool's.
	Head func() (uint64, bool)
	// Window is the chain's head window, which the head streams read
	// (wire.go).
	Window *headstore.Window
}

// Ref is the ChainRef c is served under.
func (c Chain) Ref() pb.ChainRef { return RefOf(c.ChainID, c.GRPCID) }

// Table is the chains served now, as the app keeps them.
type Table interface {
	// Chains lists them. Calls and streams read it when they begin, so a
	// reload's chains are served at once.
	Chains() []Chain
	// Changed is closed when the list next changes: a config reload added,
	// removed or reconfigured chains (or remotes). Open streams then look
	// again at the chains they serve.
	Changed() <-chan struct{}
}

// find is the chain served as ref, or false.
func find(chains []Chain, ref pb.ChainRef) (Chain, bool) {
	if ref == pb.ChainRef_CHAIN_UNSPECIFIED {
		return Chain{}, false
	}
	for _, c := range chains {
		if c.Ref() == ref {
			return c, true
		}
	}
	return Chain{}, false
}

// served names the chains served over gRPC, for an UNAVAILABLE's message:
// "CHAIN_ETHEREUM__MAINNET (100, eth)".
func served(chains []Chain) string {
	var names []string
	for _, c := range chains {
		if r := c.Ref(); r != pb.ChainRef_CHAIN_UNSPECIFIED {
			names = append(names, refName(r)+" ("+itoa(int64(r))+", "+c.Name+")")
		}
	}
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// refName is ref's enum name, or its number when the protos name none.
func refName(ref pb.ChainRef) string {
	if n, ok := pb.ChainRef_name[int32(ref)]; ok {
		return n
	}
	return itoa(int64(ref))
}

// availability is a chain's state as Dshackle's AvailabilityEnum: OK when
// it is ready (/readyz), else UNAVAILABLE.
func (c Chain) availability() pb.AvailabilityEnum {
	if c.Ready() {
		return pb.AvailabilityEnum_AVAIL_OK
	}
	return pb.AvailabilityEnum_AVAIL_UNAVAILABLE
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
