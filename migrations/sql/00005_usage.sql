-- Usage a tenant can be billed from (package usage): per tenant, chain,
-- method and UTC day, the calls, the credits they cost, the errors among
-- them and the bytes answered. Each replica adds what it served to the
-- row every flush (ON CONFLICT ... DO UPDATE SET calls = calls + ...), so
-- a row is the cluster's total. tenant is a tenant's name, or an API
-- key's without one; method is a known method or "other".

-- +goose Up
CREATE TABLE usage_daily (
    day       date   NOT NULL,
    tenant    text   NOT NULL,
    chain     text   NOT NULL,
    method    text   NOT NULL,
    calls     bigint NOT NULL,
    credits   bigint NOT NULL,
    errors    bigint NOT NULL,
    bytes_out bigint NOT NULL,
    PRIMARY KEY (tenant, day, chain, method)
);

-- +goose Down
DROP TABLE usage_daily;
