package evm

import (
	"encoding/json"
	"testing"
)

func TestParseBlockRef(t *testing.T) {
	tests := []struct {
		give    string
		want    BlockRef
		wantErr bool
	}{
		{give: ``, want: BlockRef{Kind: RefNone}},
		{give: `null`, want: BlockRef{Kind: RefNone}},
		{give: `"latest"`, want: BlockRef{Kind: RefLatest}},
		{give: `"pending"`, want: BlockRef{Kind: RefPending}},
		{give: `"safe"`, want: BlockRef{Kind: RefSafe}},
		{give: `"finalized"`, want: BlockRef{Kind: RefFinalized}},
		{give: `"earliest"`, want: BlockRef{Kind: RefEarliest}},
		{give: `"0x1b4"`, want: BlockRef{Kind: RefNumber, Number: 436}},
		{give: `"0x0"`, want: BlockRef{Kind: RefNumber}},
		{give: `{"blockNumber":"0x10"}`, want: BlockRef{Kind: RefNumber, Number: 16}},
		{give: `{"blockHash":"0xabc"}`, want: BlockRef{Kind: RefHash, Hash: "0xabc"}},
		{give: `"0x` + "ab" + "0000000000000000000000000000000000000000000000000000000000000000"[:62] + `"`, want: BlockRef{Kind: RefHash, Hash: "0xab" + "0000000000000000000000000000000000000000000000000000000000000000"[:62]}},
		{give: `"0x"`, wantErr: true},
		{give: `"12"`, wantErr: true},
		{give: `"0x10000000000000000"`, wantErr: true},
		{give: `12`, wantErr: true},
		{give: `"bogus"`, wantErr: true},
		{give: `{}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := ParseBlockRef(json.RawMessage(tt.give))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParamAndLogRange(t *testing.T) {
	params := json.RawMessage(`[{"address":"0x01","fromBlock":"0x10","toBlock":"latest","topics":[null,["0xaa","0xbb"]]}]`)
	lr, err := ParseLogRange(params)
	if err != nil {
		t.Fatal(err)
	}
	if lr.From != (BlockRef{Kind: RefNumber, Number: 16}) || lr.To.Kind != RefLatest || lr.ByHash {
		t.Fatalf("range = %+v", lr)
	}
	sub, err := WithRange(params, 16, 31)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]json.RawMessage
	if err := json.Unmarshal(sub, &got); err != nil {
		t.Fatal(err)
	}
	if string(got[0]["fromBlock"]) != `"0x10"` || string(got[0]["toBlock"]) != `"0x1f"` ||
		string(got[0]["topics"]) != `[null,["0xaa","0xbb"]]` || string(got[0]["address"]) != `"0x01"` {
		t.Fatalf("sub filter = %s", sub)
	}
	byHash, err := ParseLogRange(json.RawMessage(`[{"blockHash":"0x01"}]`))
	if err != nil || !byHash.ByHash {
		t.Fatalf("blockHash filter = %+v, %v", byHash, err)
	}
	if Param(json.RawMessage(`{"a":1}`), 0) != nil || Param(json.RawMessage(`[1]`), 1) != nil {
		t.Fatal("Param must be nil for non-arrays and short arrays")
	}
}

func TestMethodLabel(t *testing.T) {
	if MethodLabel("eth_call") != "eth_call" || MethodLabel("eth_call\x00evil") != "other" {
		t.Fatal("unknown methods must be labelled other")
	}
}

func TestIsWrite(t *testing.T) {
	for method, want := range map[string]bool{
		"eth_sendRawTransaction": true, "eth_sendRawTransactionSync": true, "eth_sendUserOperation": true,
		"eth_submitWork": true, "personal_unlockAccount": true, "admin_addPeer": true, "engine_newPayloadV4": true,
		"eth_signTypedData_v4": true, "debug_setHead": true, "eth_cancelBundle": true,
		"eth_call": false, "eth_getBalance": false, "eth_getLogs": false, "debug_traceTransaction": false,
		"alchemy_getAssetTransfers": false, "eth_estimateGas": false, "nonamespace": false,
	} {
		if got := IsWrite(method); got != want {
			t.Errorf("IsWrite(%q) = %v, want %v", method, got, want)
		}
	}
}
