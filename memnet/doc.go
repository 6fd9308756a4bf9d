// Package memnet is an in-memory IP network for testing distributed Go programs in one
// process: hosts with "ip:port" addresses, stream connections (net.Conn, net.Listener, a dialer
// for grpc.WithContextDialer), memberlist transports (packets and streams), and faults
// (partitions, delay, loss, paused and crashed hosts). Every wait is on a channel or a timer, so
// inside a testing/synctest bubble it runs in virtual time.
package memnet
