// Package sockfd moves a TCP connection between the Go runtime's poller and an event loop
// of the daemon's own (the Redis protocol's and the HTTP front's, both on epoll): a socket
// taken out of a net.Conn as a bare, non-blocking file descriptor, and a net.Conn made again
// from one. On systems without event loops Take fails, and the fronts serve every
// connection on a goroutine of its own.
package sockfd
