package batch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/batch"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
)

func ExampleRead() {
	node, err := corral.New(corral.Config{Name: "example", BindAddr: "127.0.0.1"})
	if err != nil {
		panic(err)
	}
	defer node.Close(context.Background())
	groups, _ := objects.NewGroups(objects.GroupsConfig{MaxGroups: 1,
		Load: func(string) corral.LoadFunc[objects.Object] {
			return func(ctx context.Context, key string) (objects.Object, error) {
				switch key {
				case "gone":
					return objects.Object{}, corral.ErrNotFound
				case "broken":
					return objects.Object{}, errors.New("origin answered 503")
				}
				return objects.Object{Body: []byte("page " + key)}, nil
			}
		}})
	g, _ := groups.Group(node, "pages")

	keys := []string{"1", "gone", "2", "broken", "1"}
	a, err := batch.Read(context.Background(), g, nil, keys)
	if err != nil {
		panic(err)
	}
	for _, key := range keys { // as MGET answers: by position, duplicates included
		if v, ok := a.Values[key]; ok {
			fmt.Printf("%s: %s\n", key, v.Body)
		}
	}
	fmt.Println("missing:", a.Missing)
	for _, f := range a.Failed {
		fmt.Printf("failed: %s: %v\n", f.Key, strings.Contains(f.Err.Error(), "origin answered 503"))
	}

	_, err = batch.Read(context.Background(), g, nil, []string{"3", ""})
	fmt.Println(errors.Is(err, batch.ErrRefused), err)
	// Output:
	// 1: page 1
	// 2: page 2
	// 1: page 1
	// missing: [gone]
	// failed: broken: true
	// true batch refused: key 2 of 2: empty key
}
