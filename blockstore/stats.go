package blockstore

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Tables holding a chain's history, as the table label and Stats name them.
var historyTables = []string{"blocks", "transactions", "logs"}

// ChainStats is the size of one chain's stored history.
type ChainStats struct {
	ChainID    uint64
	Partitions int
	Covered    []Range // the ranges stored completely, ascending
	Tables     []TableStats
}

// TableStats is one table of a chain: the sums over its partitions.
type TableStats struct {
	Table string // blocks, transactions or logs
	// Rows is Postgres's estimate (pg_class.reltuples, as vacuum and
	// analyze leave it): counting a busy chain's logs exactly would read
	// them all.
	Rows  int64
	Bytes int64 // tables, TOAST and indexes
}

// Bytes is the chain's history's size on disk.
func (s ChainStats) Bytes() int64 {
	var n int64
	for _, t := range s.Tables {
		n += t.Bytes
	}
	return n
}

// Stats returns the size of every chain's stored history, by chain id.
func (p *Postgres) Stats(ctx context.Context) ([]ChainStats, error) {
	var out []ChainStats
	err := p.do(ctx, opStats, true, func(ctx context.Context) error {
		out = out[:0]
		var batch pgx.Batch
		byChain := map[int64]*ChainStats{}
		var order []int64
		chain := func(id int64) *ChainStats {
			s, ok := byChain[id]
			if !ok {
				s = &ChainStats{ChainID: uint64(id)}
				for _, t := range historyTables {
					s.Tables = append(s.Tables, TableStats{Table: t})
				}
				byChain[id] = s
				order = append(order, id)
			}
			return s
		}
		batch.Queue(`SELECT p.chain_id, t.i, count(*), sum(greatest(c.reltuples, 0))::bigint, sum(pg_total_relation_size(c.oid))::bigint
			FROM history_partitions p
			CROSS JOIN unnest($1::text[]) WITH ORDINALITY AS t(name, i)
			JOIN pg_class c ON c.oid = to_regclass(quote_ident(format('%s_c%s_%s', t.name, p.chain_id, p.from_block)))
			GROUP BY 1, 2 ORDER BY 1, 2`, historyTables).Query(func(rows pgx.Rows) error {
			var id, i, parts, n, bytes int64
			_, err := pgx.ForEachRow(rows, []any{&id, &i, &parts, &n, &bytes}, func() error {
				s := chain(id)
				s.Partitions = int(parts)
				s.Tables[i-1].Rows, s.Tables[i-1].Bytes = n, bytes
				return nil
			})
			return err
		})
		batch.Queue(`SELECT chain_id, from_block, to_block FROM coverage ORDER BY chain_id, from_block`).Query(func(rows pgx.Rows) error {
			var id, from, to int64
			_, err := pgx.ForEachRow(rows, []any{&id, &from, &to}, func() error {
				s := chain(id)
				s.Covered = append(s.Covered, Range{From: uint64(from), To: uint64(to)})
				return nil
			})
			return err
		})
		if err := p.pool.SendBatch(ctx, &batch).Close(); err != nil {
			return err
		}
		slices.Sort(order)
		for _, id := range order {
			out = append(out, *byChain[id])
		}
		return nil
	})
	return out, err
}
