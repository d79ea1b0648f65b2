// Package side runs a chain's remotes beside its pool: shadows and
// transaction groups. Neither is a member of the pool: no head is
// followed on them, no selection, score, budget, consensus or hedge
// counts them, and the pool's calls never reach them.
//
//   - A shadow (shadow: true) gets a sampled copy of the chain's reads
//     after they are answered; its answer is compared with the one served,
//     counted as a match or mismatch by method, and thrown away: the way
//     an operator dark-launches a provider.
//   - A group member (group: NAME) serves the chain's transaction_routes
//     that name its group: private relays for raw transactions and
//     bundles, bundlers for ERC-4337. A routed call fails over within its
//     group only, and reaches the public remotes only when its route says
//     fallback_public.
//
// It owns the side remotes' transports, the routes and their check, the
// shadow calls (bounded, owned by the Side and stopped by Close) and
// their metrics. It must not touch the pool: it imports no remotes
// package but the leaves wire and verdict, and reaches the pool only
// through the function it is given for a route's public fallback. The
// remotes' settings (shadow, shadow_sample, group) are checked by the
// pool's config.
package side
