package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/remotes"
)

// redisCordons keeps the cordons in the chain's HASH (keyspace.Chain.
// Cordons) and announces each change on its channel.
type redisCordons struct {
	rdb redis.UniversalClient
}

var _ cordonStore = (*redisCordons)(nil)

func (r *redisCordons) list(ctx context.Context, chain string) ([]remotes.ManualCordon, error) {
	key := keyspace.For(chain).Cordons
	m, err := r.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("read cordons %s: %w", key, err)
	}
	out := make([]remotes.ManualCordon, 0, len(m))
	for name, v := range m {
		var c remotes.ManualCordon
		if json.Unmarshal([]byte(v), &c) != nil {
			continue // not ours to fix; uncordon replaces it
		}
		c.Remote = name
		out = append(out, c)
	}
	return out, nil
}

func (r *redisCordons) put(ctx context.Context, chain string, c remotes.ManualCordon) error {
	ks := keyspace.For(chain)
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := r.rdb.HSet(ctx, ks.Cordons, c.Remote, v).Err(); err != nil {
		return fmt.Errorf("write cordon %s: %w", ks.Cordons, err)
	}
	r.announce(ctx, ks)
	return nil
}

func (r *redisCordons) remove(ctx context.Context, chain, remote string) (bool, error) {
	ks := keyspace.For(chain)
	n, err := r.rdb.HDel(ctx, ks.Cordons, remote).Result()
	if err != nil {
		return false, fmt.Errorf("remove cordon %s: %w", ks.Cordons, err)
	}
	r.announce(ctx, ks)
	return n > 0, nil
}

// announce tells the other replicas; a lost message is healed by their
// resync, so its error is not the caller's.
func (r *redisCordons) announce(ctx context.Context, ks keyspace.Chain) {
	_ = r.rdb.Publish(ctx, ks.CordonsNotify, "1").Err()
}

func (r *redisCordons) watch(ctx context.Context, chains func() []string, rechain <-chan struct{}, changed func(string)) {
	// Classic pub/sub, not sharded (SSUBSCRIBE): on a Redis Cluster a
	// PUBLISH reaches every node, so one connection, to whichever node,
	// hears every chain's channel, where sharded channels of chains in
	// different slots would need a connection per slot. Cordons change
	// rarely; the broadcast costs nothing. go-redis resubscribes after a
	// lost connection by itself, to the node then serving the first
	// channel's slot: a failed-over master's replica.
	sub := r.rdb.Subscribe(ctx)
	defer sub.Close()
	byChannel := map[string]string{}
	resubscribe := func() {
		want := map[string]string{}
		for _, c := range chains() {
			want[keyspace.For(c).CordonsNotify] = c
		}
		var add, drop []string
		for ch := range want {
			if _, ok := byChannel[ch]; !ok {
				add = append(add, ch)
			}
		}
		for ch := range byChannel {
			if _, ok := want[ch]; !ok {
				drop = append(drop, ch)
			}
		}
		// go-redis keeps the channels of a failed subscribe and subscribes
		// them when it reconnects; the resync covers the gap.
		if len(add) > 0 {
			_ = sub.Subscribe(ctx, add...)
		}
		if len(drop) > 0 {
			_ = sub.Unsubscribe(ctx, drop...)
		}
		byChannel = want
	}
	resubscribe()
	msgs := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rechain:
			resubscribe()
		case m, ok := <-msgs:
			if !ok {
				return
			}
			if c, ok := byChannel[m.Channel]; ok {
				changed(c)
			}
		}
	}
}

// heartbeat is one replica's entry in keyspace.Replicas.
type heartbeat struct {
	Version string    `json:"version"`
	Started time.Time `json:"started"`
	Seen    time.Time `json:"seen"`
}

// presenceBeats is how many heartbeats a replica's presence key outlives
// the heartbeat that set it: one missed beat (a slow Redis call, a GC
// pause) does not make it look gone, three do.
const presenceBeats = 3

// writeHeartbeat sets id's presence key for ttl and its entry in the
// HASH, in that order: a reader that finds the entry finds the key too,
// until the replica stops beating.
func writeHeartbeat(ctx context.Context, rdb redis.UniversalClient, id string, ttl time.Duration, hb heartbeat) error {
	v, err := json.Marshal(hb)
	if err != nil {
		return err
	}
	if err := rdb.Set(ctx, keyspace.ReplicaPresence(id), hb.Version, ttl).Err(); err != nil {
		return fmt.Errorf("write heartbeat: %w", err)
	}
	if err := rdb.HSet(ctx, keyspace.Replicas, id, v).Err(); err != nil {
		return fmt.Errorf("write heartbeat: %w", err)
	}
	return nil
}

// removeHeartbeat forgets id at once: a clean stop.
func removeHeartbeat(ctx context.Context, rdb redis.UniversalClient, id string) error {
	if err := rdb.Del(ctx, keyspace.ReplicaPresence(id)).Err(); err != nil {
		return fmt.Errorf("remove heartbeat: %w", err)
	}
	if err := rdb.HDel(ctx, keyspace.Replicas, id).Err(); err != nil {
		return fmt.Errorf("remove heartbeat: %w", err)
	}
	return nil
}

// readReplicas lists the replicas whose presence key lives, and deletes
// the others' entries.
func readReplicas(ctx context.Context, rdb redis.UniversalClient) ([]ReplicaView, error) {
	m, err := rdb.HGetAll(ctx, keyspace.Replicas).Result()
	if err != nil {
		return nil, fmt.Errorf("read replicas: %w", err)
	}
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	// One EXISTS a key: on a Redis Cluster the keys sit in different
	// slots, which one multi-key EXISTS cannot span; the pipeline sends
	// each to its node.
	alive := make([]*redis.IntCmd, len(ids))
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			alive[i] = p.Exists(ctx, keyspace.ReplicaPresence(id))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read replicas: %w", err)
	}
	var out []ReplicaView
	var gone []string
	for i, id := range ids {
		var hb heartbeat
		if alive[i].Val() == 0 || json.Unmarshal([]byte(m[id]), &hb) != nil {
			gone = append(gone, id)
			continue
		}
		out = append(out, ReplicaView{Replica: id, Version: hb.Version, Started: hb.Started, LastSeen: hb.Seen})
	}
	if len(gone) > 0 {
		// A replica that beats again between the read and this delete
		// writes its entry back at its next beat.
		_ = rdb.HDel(ctx, keyspace.Replicas, gone...).Err() // the next reader tries again
	}
	return out, nil
}
