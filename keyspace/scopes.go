package keyspace

// Scopes are the keys of the tenants and API keys an operator keeps in
// Redis (package edge's ScopeStore) rather than in the config file. They
// share one hash tag, so one MULTI writes an entry and bumps the version
// on a Redis Cluster too:
//
//	venn:{scopes}:tenants  HASH tenant name -> YAML of an edge.Tenant
//	venn:{scopes}:keys     HASH key name -> YAML of an edge.APIKey, its
//	                       secret replaced by its SHA-256 (key_sha256)
//	venn:{scopes}:version  an integer bumped by every write; replicas poll
//	                       it and reload both hashes when it moves
type Scopes struct {
	Tenants string
	Keys    string
	Version string
}

// DefaultScopesTag is the hash tag of the scopes' keys unless
// auth.redis.tag names another (two clusters sharing one Redis).
const DefaultScopesTag = "scopes"

// ScopesKeys are the scopes' keys under hash tag tag.
func ScopesKeys(tag string) Scopes {
	p := "venn:{" + tag + "}:"
	return Scopes{Tenants: p + "tenants", Keys: p + "keys", Version: p + "version"}
}
