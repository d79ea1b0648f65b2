// Package cluster is the harness for venn clusters run as real processes
// on 127.0.0.1, shared by the cluster end-to-end tests (e2e/cluster) and
// the cluster benches (cmd/vennbench): a private redis-server that a test
// may kill and start again, the leader lease read from it, and the venn
// binary built for the run.
package cluster
