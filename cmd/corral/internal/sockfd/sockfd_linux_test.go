//go:build linux

package sockfd

import (
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A connection taken out of the poller is a descriptor that reads and writes the same
// socket; a net.Conn made of it again does too, and closing that one leaves the descriptor
// open.
func TestTakeAndConnKeepTheSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	client.SetDeadline(time.Now().Add(10 * time.Second))
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := Take(server)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Write([]byte("x")); err == nil {
		t.Fatal("the net.Conn Take took from still writes")
	}
	if _, err := io.WriteString(client, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	var n int
	for deadline := time.Now().Add(10 * time.Second); ; {
		if n, err = Read(fd, buf); err != unix.EAGAIN {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the descriptor read nothing in 10 s")
		}
		time.Sleep(time.Millisecond) // non-blocking: nothing has arrived yet
	}
	if err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	if _, err := Write(fd, []byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(client, buf[:4]); err != nil || string(buf[:4]) != "pong" {
		t.Fatalf("the client read %q, %v", buf[:4], err)
	}
	nc, err := Conn(fd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(nc, "again"); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if _, err := Write(fd, []byte("!")); err != nil {
		t.Fatalf("the descriptor after its net.Conn closed: %v", err)
	}
	if _, err := io.ReadFull(client, buf[:6]); err != nil || string(buf[:6]) != "again!" {
		t.Fatalf("the client read %q, %v", buf[:6], err)
	}
	Close(fd)
	if n, err := client.Read(buf); err != io.EOF {
		t.Fatalf("after Close the client read %d bytes, %v; want EOF", n, err)
	}
}
