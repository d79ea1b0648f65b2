package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/headstore/keyspace"
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
	Leads   []string  `json:"leads,omitempty"`
}

// replicaForget: a replica not seen for this long is dropped from the
// list (it stopped, or was replaced under another ID).
const replicaForget = 10 * time.Minute

func writeHeartbeat(ctx context.Context, rdb redis.UniversalClient, id string, hb heartbeat) error {
	v, err := json.Marshal(hb)
	if err != nil {
		return err
	}
	if err := rdb.HSet(ctx, keyspace.Replicas, id, v).Err(); err != nil {
		return fmt.Errorf("write heartbeat: %w", err)
	}
	return nil
}

// readReplicas lists the replicas seen within replicaForget of now, and
// deletes the others.
func readReplicas(ctx context.Context, rdb redis.UniversalClient, now time.Time) ([]ReplicaView, error) {
	m, err := rdb.HGetAll(ctx, keyspace.Replicas).Result()
	if err != nil {
		return nil, fmt.Errorf("read replicas: %w", err)
	}
	var out []ReplicaView
	var stale []string
	for id, v := range m {
		var hb heartbeat
		if json.Unmarshal([]byte(v), &hb) != nil || now.Sub(hb.Seen) > replicaForget {
			stale = append(stale, id)
			continue
		}
		out = append(out, ReplicaView{Replica: id, Version: hb.Version, Started: hb.Started, LastSeen: hb.Seen, Leads: hb.Leads})
	}
	if len(stale) > 0 {
		_ = rdb.HDel(ctx, keyspace.Replicas, stale...).Err() // the next reader tries again
	}
	return out, nil
}
