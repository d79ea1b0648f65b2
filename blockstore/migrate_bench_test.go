package blockstore

import (
	"context"
	"testing"

	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/migrations"
)

// BenchmarkMigrationPartition times migration 4 (moving an unpartitioned
// store into partitions) on a store of busy blocks: per block one row in
// blocks, 180 in transactions and 260 in logs, with payloads of mainnet's
// size. It reports the time per million rows moved, for the README's
// upgrade notes.
func BenchmarkMigrationPartition(b *testing.B) {
	const (
		blocks = 1000
		txs    = 180
		logs   = 260
		rows   = blocks * (1 + txs + logs)
	)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		u := pgtest.Empty(b)
		if err := migrations.UpTo(ctx, u, 3, nil); err != nil {
			b.Fatal(err)
		}
		// Numbers 100 apart: the blocks span a few partitions.
		pgtest.Exec(b, u, `INSERT INTO blocks (chain_id, number, hash, parent, time, shell, full_json)
			SELECT 1, n * 100, sha256(int8send(n)), sha256(int8send(n - 1)), n, convert_to(repeat('s', 600), 'UTF8'), NULL
			FROM generate_series(1, $1::bigint) AS n`, blocks)
		pgtest.Exec(b, u, `INSERT INTO transactions (chain_id, block_number, idx, hash, tx, receipt)
			SELECT 1, n * 100, i, sha256(int8send(n * 1000 + i)), convert_to(repeat('t', 250), 'UTF8'), convert_to(repeat('r', 350), 'UTF8')
			FROM generate_series(1, $1::bigint) AS n, generate_series(0, $2::int - 1) AS i`, blocks, txs)
		pgtest.Exec(b, u, `INSERT INTO logs (chain_id, block_number, log_index, tx_index, tx_hash, address, topic0, topic1, topic2, topic3, log)
			SELECT 1, n * 100, i, i % 180, sha256(int8send(n * 1000 + i % 180)), substr(sha256(int8send(i % 50)), 1, 20),
				sha256(int8send(i % 7)), sha256(int8send(n * 1000 + i)), sha256(int8send(i)), NULL, convert_to(repeat('l', 300), 'UTF8')
			FROM generate_series(1, $1::bigint) AS n, generate_series(0, $2::int - 1) AS i`, blocks, logs)
		pgtest.Exec(b, u, `VACUUM ANALYZE`)
		b.StartTimer()
		if _, err := migrations.Up(ctx, u, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N)/rows*1e6, "s/Mrows")
}
