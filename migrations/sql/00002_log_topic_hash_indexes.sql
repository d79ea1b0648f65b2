-- Topics 1 to 3 (addresses, ids, amounts) are mostly distinct and selective,
-- and repeat across blocks rather than within one, so a btree ordered by
-- block within a value deduplicates little of them. Hash indexes take about
-- a third of the space and still serve eth_getLogs: a bitmap of the value's
-- logs combined with the block range. Addresses and topic0 (event
-- signatures) keep their btrees.

-- +goose Up
DROP INDEX logs_topic1;
DROP INDEX logs_topic2;
DROP INDEX logs_topic3;
CREATE INDEX logs_topic1 ON logs USING hash (topic1) WHERE topic1 IS NOT NULL;
CREATE INDEX logs_topic2 ON logs USING hash (topic2) WHERE topic2 IS NOT NULL;
CREATE INDEX logs_topic3 ON logs USING hash (topic3) WHERE topic3 IS NOT NULL;

-- +goose Down
DROP INDEX logs_topic1;
DROP INDEX logs_topic2;
DROP INDEX logs_topic3;
CREATE INDEX logs_topic1 ON logs (chain_id, topic1, block_number) WHERE topic1 IS NOT NULL;
CREATE INDEX logs_topic2 ON logs (chain_id, topic2, block_number) WHERE topic2 IS NOT NULL;
CREATE INDEX logs_topic3 ON logs (chain_id, topic3, block_number) WHERE topic3 IS NOT NULL;
