-- The response cache's Postgres tier (package cache): settled answers of
-- expensive methods (traces, eth_getProof), which outlive a Redis flush.
-- key is the cache key (a 32-byte digest of the chain, method and params
-- with the block resolved); an answer under it never changes, so a row is
-- written once and only retention deletes it. value is the answer's JSON
-- byte for byte, as bytea (never jsonb, which reorders).

-- +goose Up
CREATE TABLE cache_entries (
    chain_id   bigint      NOT NULL,
    key        bytea       NOT NULL,
    method     text        NOT NULL,
    block      bigint      NOT NULL, -- the answer's block; 0 unknown
    error      boolean     NOT NULL, -- value is a deterministic error (a revert)
    value      bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, key)
);
-- Retention deletes a chain's oldest rows: by age, and past its row limit.
CREATE INDEX cache_entries_age ON cache_entries (chain_id, created_at);

-- +goose Down
DROP TABLE cache_entries;
