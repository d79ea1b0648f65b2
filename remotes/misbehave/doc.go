// Package misbehave is the record of remotes that served data the pool
// could not trust: the kinds of misbehaviour (kind.go), the Recorder that
// logs, counts and writes each one to the chain's misbehaviour log
// (record.go, log.go: JSON lines through a bounded queue, never blocking a
// call), the strike window that decides a cordon (Strike), and the series
// of votes and misbehaviour (metrics.go).
//
// It decides nothing about rotation and knows no Pool or Remote: remotes
// reports a misbehaviour, asks Strike whether it earns a cordon, and
// itself cordons the remote (never the chain's last in rotation) and tells
// whoever keeps its answers.
package misbehave
