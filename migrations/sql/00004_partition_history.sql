-- blocks, transactions and logs become partitioned tables: by chain and
-- block range (RANGE (chain_id, number)), each partition one chain's
-- [from_block, to_block) in all three tables. A busy chain's history is
-- then many tables of bounded size, each indexed, vacuumed and analyzed
-- on its own, and old ranges are detached or dropped whole (retention)
-- rather than deleted row by row. Queries name the chain and a block
-- range or number, so the planner reads only the partitions concerned.
--
-- history_partitions lists the ranges made so far; the blockstore creates
-- new ones (venn_history_partition) ahead of its writes. Rows already
-- stored move into partitions of 100,000 blocks.
--
-- The copy runs in the migration's one transaction, holding the three
-- tables throughout: replicas' history reads and writes wait for it
-- (README, upgrading to partitioned history).
--
-- Partitions hold one chain each, so the log indexes no longer lead with
-- chain_id.

-- +goose Up
CREATE TABLE history_partitions (
    chain_id   bigint NOT NULL,
    from_block bigint NOT NULL, -- the first block number of the range
    to_block   bigint NOT NULL, -- past the last one
    PRIMARY KEY (chain_id, from_block),
    CHECK (from_block < to_block)
);

-- venn_history_partition creates the partitions of chain's blocks [lo, hi)
-- in blocks, transactions and logs, named TABLE_cCHAIN_LO, and lists the
-- range. Each is made a table first and then attached, which takes a
-- SHARE UPDATE EXCLUSIVE lock of the parent (CREATE TABLE ... PARTITION OF
-- would take ACCESS EXCLUSIVE, stopping every read of every chain); the
-- parent's indexes are built on the empty table as it is attached.
-- +goose StatementBegin
CREATE FUNCTION venn_history_partition(chain bigint, lo bigint, hi bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    parent text;
    part   text;
BEGIN
    FOREACH parent IN ARRAY ARRAY['blocks', 'transactions', 'logs'] LOOP
        part := format('%s_c%s_%s', parent, chain, lo);
        EXECUTE format('CREATE TABLE %I (LIKE %I)', part, parent);
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%s, %s) TO (%s, %s)',
            parent, part, chain, lo, chain, hi);
    END LOOP;
    INSERT INTO history_partitions (chain_id, from_block, to_block) VALUES (chain, lo, hi);
END
$$;
-- +goose StatementEnd

ALTER TABLE blocks RENAME TO blocks_unpartitioned;
ALTER TABLE transactions RENAME TO transactions_unpartitioned;
ALTER TABLE logs RENAME TO logs_unpartitioned;
ALTER INDEX blocks_pkey RENAME TO blocks_unpartitioned_pkey;
ALTER INDEX blocks_hash RENAME TO blocks_unpartitioned_hash;
ALTER INDEX transactions_pkey RENAME TO transactions_unpartitioned_pkey;
ALTER INDEX transactions_hash RENAME TO transactions_unpartitioned_hash;
ALTER INDEX logs_pkey RENAME TO logs_unpartitioned_pkey;
ALTER INDEX logs_address RENAME TO logs_unpartitioned_address;
ALTER INDEX logs_topic0 RENAME TO logs_unpartitioned_topic0;
ALTER INDEX logs_topic1 RENAME TO logs_unpartitioned_topic1;
ALTER INDEX logs_topic2 RENAME TO logs_unpartitioned_topic2;
ALTER INDEX logs_topic3 RENAME TO logs_unpartitioned_topic3;

-- Columns as in 00001_history.sql. The keys and indexes come after the
-- rows moved: built once per partition rather than row by row.
CREATE TABLE blocks (
    chain_id  bigint NOT NULL,
    number    bigint NOT NULL,
    hash      bytea  NOT NULL,
    parent    bytea  NOT NULL,
    time      bigint NOT NULL,
    shell     bytea  NOT NULL,
    full_json bytea
) PARTITION BY RANGE (chain_id, number);

CREATE TABLE transactions (
    chain_id     bigint  NOT NULL,
    block_number bigint  NOT NULL,
    idx          integer NOT NULL,
    hash         bytea   NOT NULL,
    tx           bytea   NOT NULL,
    receipt      bytea   NOT NULL
) PARTITION BY RANGE (chain_id, block_number);

CREATE TABLE logs (
    chain_id     bigint  NOT NULL,
    block_number bigint  NOT NULL,
    log_index    integer NOT NULL,
    tx_index     integer NOT NULL,
    tx_hash      bytea   NOT NULL,
    address      bytea   NOT NULL,
    topic0       bytea,
    topic1       bytea,
    topic2       bytea,
    topic3       bytea,
    log          bytea   NOT NULL
) PARTITION BY RANGE (chain_id, block_number);

-- Besides the spans holding rows, the span above each chain's highest
-- block: a replica not yet upgraded writes into the partitioned tables
-- without making partitions, and goes on archiving until its chain
-- passes that span.
SELECT venn_history_partition(chain_id, span * 100000, span * 100000 + 100000)
FROM (
    SELECT chain_id, number / 100000 AS span FROM blocks_unpartitioned
    UNION SELECT chain_id, block_number / 100000 FROM transactions_unpartitioned
    UNION SELECT chain_id, block_number / 100000 FROM logs_unpartitioned
    UNION SELECT chain_id, max(number) / 100000 + 1 FROM blocks_unpartitioned GROUP BY chain_id
) AS spans
ORDER BY chain_id, span;

INSERT INTO blocks SELECT chain_id, number, hash, parent, time, shell, full_json FROM blocks_unpartitioned;
INSERT INTO transactions SELECT chain_id, block_number, idx, hash, tx, receipt FROM transactions_unpartitioned;
INSERT INTO logs SELECT chain_id, block_number, log_index, tx_index, tx_hash, address, topic0, topic1, topic2, topic3, log
FROM logs_unpartitioned;
DROP TABLE blocks_unpartitioned;
DROP TABLE transactions_unpartitioned;
DROP TABLE logs_unpartitioned;

ALTER TABLE blocks ADD PRIMARY KEY (chain_id, number);
CREATE INDEX blocks_hash ON blocks USING hash (hash);
ALTER TABLE transactions ADD PRIMARY KEY (chain_id, block_number, idx);
CREATE INDEX transactions_hash ON transactions USING hash (hash);
ALTER TABLE logs ADD PRIMARY KEY (chain_id, block_number, log_index);
CREATE INDEX logs_address ON logs (address, block_number);
CREATE INDEX logs_topic0 ON logs (topic0, block_number) WHERE topic0 IS NOT NULL;
CREATE INDEX logs_topic1 ON logs USING hash (topic1) WHERE topic1 IS NOT NULL;
CREATE INDEX logs_topic2 ON logs USING hash (topic2) WHERE topic2 IS NOT NULL;
CREATE INDEX logs_topic3 ON logs USING hash (topic3) WHERE topic3 IS NOT NULL;

-- +goose Down
CREATE TABLE blocks_unpartitioned (LIKE blocks);
CREATE TABLE transactions_unpartitioned (LIKE transactions);
CREATE TABLE logs_unpartitioned (LIKE logs);
INSERT INTO blocks_unpartitioned SELECT * FROM blocks;
INSERT INTO transactions_unpartitioned SELECT * FROM transactions;
INSERT INTO logs_unpartitioned SELECT * FROM logs;
DROP TABLE blocks;
DROP TABLE transactions;
DROP TABLE logs;
DROP FUNCTION venn_history_partition(bigint, bigint, bigint);
DROP TABLE history_partitions;
ALTER TABLE blocks_unpartitioned RENAME TO blocks;
ALTER TABLE transactions_unpartitioned RENAME TO transactions;
ALTER TABLE logs_unpartitioned RENAME TO logs;
ALTER TABLE blocks ADD PRIMARY KEY (chain_id, number);
CREATE INDEX blocks_hash ON blocks USING hash (hash);
ALTER TABLE transactions ADD PRIMARY KEY (chain_id, block_number, idx);
CREATE INDEX transactions_hash ON transactions USING hash (hash);
ALTER TABLE logs ADD PRIMARY KEY (chain_id, block_number, log_index);
CREATE INDEX logs_address ON logs (chain_id, address, block_number);
CREATE INDEX logs_topic0 ON logs (chain_id, topic0, block_number) WHERE topic0 IS NOT NULL;
CREATE INDEX logs_topic1 ON logs USING hash (topic1) WHERE topic1 IS NOT NULL;
CREATE INDEX logs_topic2 ON logs USING hash (topic2) WHERE topic2 IS NOT NULL;
CREATE INDEX logs_topic3 ON logs USING hash (topic3) WHERE topic3 IS NOT NULL;
