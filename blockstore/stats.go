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
	// Rows is exact for a partition Postgres estimates below
	// exactRowsBelow rows; above, the estimate (the larger of
	// pg_class.reltuples, as vacuum and analyze leave it, and the live
	// rows the statistics counted since): counting a busy chain's logs
	// exactly would read them all. A partition never analyzed is counted,
	// so stored rows never show as 0.
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

// exactRowsBelow: a partition estimated below this many rows is counted
// (at most this many read), since an estimate is worst on small and new
// tables: -1 or 0 until the first analyze.
const exactRowsBelow = 100_000

// partition is one table partition as Stats reads it.
type partition struct {
	chain, table int64 // table: 1 + its index in historyTables
	schema, name string
	estimate     int64
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
		var small []partition
		batch.Queue(`SELECT p.chain_id, t.i, n.nspname, c.relname,
				greatest(c.reltuples, coalesce(pg_stat_get_live_tuples(c.oid), 0), 0)::bigint,
				pg_total_relation_size(c.oid)
			FROM history_partitions p
			CROSS JOIN unnest($1::text[]) WITH ORDINALITY AS t(name, i)
			JOIN pg_class c ON c.oid = to_regclass(quote_ident(format('%s_c%s_%s', t.name, p.chain_id, p.from_block)))
			JOIN pg_namespace n ON n.oid = c.relnamespace
			ORDER BY 1, 2`, historyTables).Query(func(rows pgx.Rows) error {
			var pt partition
			var bytes int64
			_, err := pgx.ForEachRow(rows, []any{&pt.chain, &pt.table, &pt.schema, &pt.name, &pt.estimate, &bytes}, func() error {
				s := chain(pt.chain)
				if pt.table == 1 {
					s.Partitions++
				}
				t := &s.Tables[pt.table-1]
				t.Bytes += bytes
				if pt.estimate < exactRowsBelow {
					small = append(small, pt)
				} else {
					t.Rows += pt.estimate
				}
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
		if err := p.countSmall(ctx, small, chain); err != nil {
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

// countSmall adds the rows of the partitions estimated small, counted, to
// their chains' tables. A count reads at most exactRowsBelow rows: past
// that, the estimate was stale and the count's bound is the better one.
func (p *Postgres) countSmall(ctx context.Context, parts []partition, chain func(int64) *ChainStats) error {
	if len(parts) == 0 {
		return nil
	}
	var batch pgx.Batch
	for _, pt := range parts {
		batch.Queue(`SELECT count(*) FROM (SELECT FROM `+pgx.Identifier{pt.schema, pt.name}.Sanitize()+` LIMIT $1) s`,
			exactRowsBelow).QueryRow(func(row pgx.Row) error {
			var n int64
			if err := row.Scan(&n); err != nil {
				return err
			}
			if n == exactRowsBelow {
				n = max(n, pt.estimate) // cut short: a lower bound
			}
			chain(pt.chain).Tables[pt.table-1].Rows += n
			return nil
		})
	}
	return p.pool.SendBatch(ctx, &batch).Close()
}
