package emerald

import (
	"fmt"
	"slices"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/subcenter"
)

// rawCodec hands a reply's bytes over as they came on the wire.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = slices.Clone(data)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// oldMsg is a message of emeraldpay/dshackle's proto/blockchain.proto, the
// definition older emeraldpay clients are generated from: each field's
// wire types (a repeated scalar packed or not) and, for a message field,
// its fields. A client built from it takes a field it has with another
// wire type as a decode error (protobuf.js reads field 7 as a string
// whatever came); fields it lacks it skips.
type oldMsg map[protowire.Number]oldField

type oldField struct {
	name  string
	wires []protowire.Type
	str   bool   // a string: UTF-8
	msg   oldMsg // a message
}

var (
	oldVarint = []protowire.Type{protowire.VarintType}
	oldBytes  = []protowire.Type{protowire.BytesType}
	oldLabel  = oldMsg{1: {name: "name", wires: oldBytes, str: true}, 2: {name: "value", wires: oldBytes, str: true}}
	// DescribeChain: supportedSubscriptions is field 7, where
	// drpcorg/emerald-grpc has currentHeight (int64) and moves the
	// subscriptions to 8.
	oldDescribeChain = oldMsg{
		1: {name: "chain", wires: oldVarint},
		2: {name: "status", wires: oldBytes, msg: oldMsg{1: {name: "chain", wires: oldVarint},
			2: {name: "availability", wires: oldVarint}, 3: {name: "quorum", wires: oldVarint}}},
		3: {name: "nodes", wires: oldBytes, msg: oldMsg{1: {name: "quorum", wires: oldVarint},
			2: {name: "labels", wires: oldBytes, msg: oldLabel}}},
		4: {name: "supportedMethods", wires: oldBytes, str: true},
		5: {name: "excludedMethods", wires: oldBytes, str: true},
		6: {name: "capabilities", wires: []protowire.Type{protowire.VarintType, protowire.BytesType}},
		7: {name: "supportedSubscriptions", wires: oldBytes, str: true},
	}
	oldDescribeResponse = oldMsg{1: {name: "chains", wires: oldBytes, msg: oldDescribeChain}}
)

// decodeOld decodes b as m, as a client generated from the old definition
// does, and gathers the strings it reads by path ("chains.supportedMethods").
func decodeOld(b []byte, m oldMsg, path string, strs map[string][]string) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		f, known := m[num]
		if known && !slices.Contains(f.wires, typ) {
			return fmt.Errorf("%s%s (field %d): wire type %d, the old definition has %v", path, f.name, num, typ, f.wires)
		}
		val := b
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if !known || typ != protowire.BytesType {
			continue
		}
		v, _ := protowire.ConsumeBytes(val)
		switch {
		case f.str:
			if !utf8.Valid(v) {
				return fmt.Errorf("%s%s: not UTF-8", path, f.name)
			}
			strs[path+f.name] = append(strs[path+f.name], string(v))
		case f.msg != nil:
			if err := decodeOld(v, f.msg, path+f.name+".", strs); err != nil {
				return err
			}
		}
	}
	return nil
}

// An emeraldpay client generated from dshackle's older definition, where
// DescribeChain's field 7 is supportedSubscriptions (a string) and not
// currentHeight, decodes venn's Describe: nothing venn sends there
// conflicts with it.
func TestDescribeDecodesWithEmeraldpayDefinition(t *testing.T) {
	r := newRig(t, subcenter.Options{}, 0)
	r.feed.commit(1)
	conn, err := grpc.NewClient(r.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var raw []byte
	if err := conn.Invoke(waitCtx(t), pb.Blockchain_Describe_FullMethodName, &pb.DescribeRequest{}, &raw,
		grpc.ForceCodec(rawCodec{})); err != nil {
		t.Fatal(err)
	}
	strs := map[string][]string{}
	if err := decodeOld(raw, oldDescribeResponse, "", strs); err != nil {
		t.Fatalf("an emeraldpay client fails on venn's Describe: %v", err)
	}
	if !slices.Contains(strs["chains.supportedMethods"], "eth_blockNumber") ||
		!slices.Contains(strs["chains.nodes.labels.value"], "sim") {
		t.Fatalf("what the emeraldpay client read: %v", strs)
	}
	// The current client reads the same bytes whole.
	var now pb.DescribeResponse
	if err := proto.Unmarshal(raw, &now); err != nil || len(now.Chains) != 1 ||
		!slices.Equal(now.Chains[0].SupportedSubscriptions, subscriptions) {
		t.Fatalf("drpcorg client: %v %v", &now, err)
	}
}
