// Package viewkeeper keeps a node's view of the cluster (package view) as its membership
// (package peer) changes. Each time the membership's list changes it makes the next view,
// keeping out of the ring the members that may not own keys yet:
//
//   - a member this node declared dead that came back (or restarted under its old name),
//     until the two have exchanged the writes they remember (reconcile.go): while two sides
//     were apart, each told its writes only to the members it saw;
//   - a member whose peer port does not speak this node's TLS, or with which no mutual TLS
//     handshake has completed yet (tls.go).
//
// It then tells the parts that hold per-member state — the peer client's connections, the
// router's breakers, the writer's strangers — and the node, through Config.Changed.
//
// # Usage
//
//	k := viewkeeper.New(viewkeeper.Config{…})  // the view starts as this node alone
//	members, err := peer.New(peer.Config{…, OnChange: k.SetMembers, OnEvent: k.Event})
//	k.Start(members)                          // reads the list OnChange may have missed
//	…
//	k.Stop()  // the node stops serving from its stores: a stopped view
//	k.Close() // ends reconciliations and checks, and waits for them
//
// The caller's duties:
//  1. Hand the membership's callbacks to SetMembers and Event, and the owner's side's news of
//     a peer that exchanged a group's writes with this node to Reconciled.
//  2. Call Close once, after the membership is closed.
package viewkeeper
