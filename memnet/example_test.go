package memnet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/corralcache/corral/memnet"
)

// A listener on one host, a dial from another. Outside a testing/synctest bubble the network
// runs in real time; with no delay configured, at once.
func Example() {
	n, err := memnet.New(memnet.Config{})
	if err != nil {
		log.Fatal(err)
	}
	server, client := n.NewHost(), n.NewHost()
	ln, err := server.Listen(7947)
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo until the client closes
	}()

	c, err := client.DialContext(context.Background(), server.Addr(7947))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello"))
	buf := make([]byte, 5)
	io.ReadFull(c, buf)
	fmt.Printf("%s -> %s: %s\n", c.LocalAddr().(*net.TCPAddr).IP, c.RemoteAddr(), buf)
	// Output: 10.0.0.2 -> 10.0.0.1:7947: hello
}

// A crash resets the connections of the crashed host and refuses new ones until it restarts.
func ExampleHost_Crash() {
	n, _ := memnet.New(memnet.Config{})
	server, client := n.NewHost(), n.NewHost()
	ln, _ := server.Listen(7947)
	c, _ := client.DialContext(context.Background(), server.Addr(7947))
	defer c.Close()

	server.Crash()
	_, err := c.Read(make([]byte, 1))
	fmt.Println("read:", errors.Is(err, syscall.ECONNRESET))
	_, err = client.DialContext(context.Background(), server.Addr(7947))
	fmt.Println("dial:", errors.Is(err, syscall.ECONNREFUSED))
	_, err = ln.Accept()
	fmt.Println("accept:", errors.Is(err, net.ErrClosed))

	server.Restart()
	ln, _ = server.Listen(7947)
	defer ln.Close()
	c2, err := client.DialContext(context.Background(), server.Addr(7947))
	fmt.Println("dial after restart:", err)
	c2.Close()
	// Output:
	// read: true
	// dial: true
	// accept: true
	// dial after restart: <nil>
}

// A dial across a partition waits, as a SYN into a cut network does, until its deadline.
func ExampleNetwork_Partition() {
	n, _ := memnet.New(memnet.Config{})
	a, b := n.NewHost(), n.NewHost()
	ln, _ := b.Listen(7947)
	defer ln.Close()

	n.Partition([]*memnet.Host{a}, []*memnet.Host{b})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := a.DialContext(ctx, b.Addr(7947))
	var ne net.Error
	fmt.Println("timeout:", errors.As(err, &ne) && ne.Timeout())

	n.Heal()
	c, err := a.DialContext(context.Background(), b.Addr(7947))
	fmt.Println("after heal:", err)
	c.Close()
	// Output:
	// timeout: true
	// after heal: <nil>
}

// Two memberlist members, each on its own host, with memberlist's LAN defaults.
func ExampleHost_NewTransport() {
	n, _ := memnet.New(memnet.Config{})
	var members []*memberlist.Memberlist
	for i := range 2 {
		tr, err := n.NewHost().NewTransport(7946)
		if err != nil {
			log.Fatal(err)
		}
		cfg := memberlist.DefaultLANConfig()
		cfg.Name = fmt.Sprint("node", i)
		cfg.Transport = tr // memberlist shuts it down with itself
		cfg.Logger = log.New(io.Discard, "", 0)
		ml, err := memberlist.Create(cfg)
		if err != nil {
			log.Fatal(err)
		}
		defer ml.Shutdown()
		members = append(members, ml)
	}
	if _, err := members[1].Join([]string{"10.0.0.1:7946"}); err != nil {
		log.Fatal(err)
	}
	seen := members[1].Members()
	slices.SortFunc(seen, func(a, b *memberlist.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, m := range seen {
		fmt.Println(m.Name, m.Address())
	}
	// Output:
	// node0 10.0.0.1:7946
	// node1 10.0.0.2:7946
}
