-- History of many chains, as the blockstore keeps it: blocks, transactions
-- with their receipts, and logs, each as the node's own JSON so that answers
-- are byte-exact. Values a row also holds in a column (its block's hash and
-- number, its transaction's hash, a log's address and topics) are replaced
-- in the JSON by one-byte codes, and each block's transactions and each
-- receipt's logs are stored once, in their own rows; the blockstore splices
-- them back on read. JSON is kept as bytea, never jsonb (which reorders).

-- +goose Up
CREATE TABLE blocks (
    chain_id bigint  NOT NULL,
    number   bigint  NOT NULL,
    hash     bytea   NOT NULL,
    parent   bytea   NOT NULL,
    time     bigint  NOT NULL,
    -- The block with an empty transactions array; or, when the node's JSON
    -- could not be split that way, the block with transaction hashes and
    -- full_json the block with transaction objects.
    shell     bytea  NOT NULL,
    full_json bytea,
    PRIMARY KEY (chain_id, number)
);
CREATE INDEX blocks_hash ON blocks USING hash (hash);

CREATE TABLE transactions (
    chain_id     bigint  NOT NULL,
    block_number bigint  NOT NULL,
    idx          integer NOT NULL,
    hash         bytea   NOT NULL,
    tx           bytea   NOT NULL,
    -- The receipt with an empty logs array (its logs are rows of logs), or
    -- whole when it could not be split that way.
    receipt      bytea   NOT NULL,
    PRIMARY KEY (chain_id, block_number, idx)
);
CREATE INDEX transactions_hash ON transactions USING hash (hash);

-- log_index is the log's position in its block (geth's logIndex).
CREATE TABLE logs (
    chain_id     bigint  NOT NULL,
    block_number bigint  NOT NULL,
    log_index    integer NOT NULL,
    tx_index     integer NOT NULL,
    tx_hash      bytea   NOT NULL, -- also in transactions: eth_getLogs needs no join for it
    address      bytea   NOT NULL,
    topic0       bytea,
    topic1       bytea,
    topic2       bytea,
    topic3       bytea,
    log          bytea   NOT NULL,
    PRIMARY KEY (chain_id, block_number, log_index)
);
-- eth_getLogs by address or by topic over a range of blocks.
CREATE INDEX logs_address ON logs (chain_id, address, block_number);
CREATE INDEX logs_topic0 ON logs (chain_id, topic0, block_number) WHERE topic0 IS NOT NULL;
CREATE INDEX logs_topic1 ON logs (chain_id, topic1, block_number) WHERE topic1 IS NOT NULL;
CREATE INDEX logs_topic2 ON logs (chain_id, topic2, block_number) WHERE topic2 IS NOT NULL;
CREATE INDEX logs_topic3 ON logs (chain_id, topic3, block_number) WHERE topic3 IS NOT NULL;

-- The ranges of blocks stored completely (block, transactions, receipts,
-- logs), merged: no two rows of a chain overlap or touch.
CREATE TABLE coverage (
    chain_id   bigint NOT NULL,
    from_block bigint NOT NULL,
    to_block   bigint NOT NULL,
    PRIMARY KEY (chain_id, from_block),
    CHECK (from_block <= to_block)
);

-- +goose Down
DROP TABLE coverage;
DROP TABLE logs;
DROP TABLE transactions;
DROP TABLE blocks;
