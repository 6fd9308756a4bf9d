package corral_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/corralcache/corral"
)

func ExampleGroup_GetMany() {
	node, err := corral.New(corral.Config{Name: "example", BindAddr: "127.0.0.1"})
	if err != nil {
		panic(err)
	}
	defer node.Close(context.Background())

	var queries int
	products, err := corral.NewGroup[string](node, "products", nil,
		corral.WithBatchLoad(func(ctx context.Context, ids []string) (map[string]string, error) {
			queries++ // SELECT … FROM products WHERE id IN (ids): one query per owner
			out := make(map[string]string, len(ids))
			for _, id := range ids {
				if id != "0" {
					out[id] = "product " + id
				}
			}
			return out, nil // an id left out is not found
		}))
	if err != nil {
		panic(err)
	}

	page, err := products.GetMany(context.Background(), []string{"1", "2", "3", "0"})
	if err != nil {
		panic(err)
	}
	ids := make([]string, 0, len(page))
	for id := range page {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	fmt.Println(strings.Join(ids, " "), "-", page["2"], "- queries:", queries)
	// Output: 1 2 3 - product 2 - queries: 1
}

func ExampleManyError() {
	node, err := corral.New(corral.Config{Name: "example", BindAddr: "127.0.0.1"})
	if err != nil {
		panic(err)
	}
	defer node.Close(context.Background())
	g, _ := corral.NewGroup(node, "g", func(ctx context.Context, key string) (string, error) {
		return "v", nil
	})

	_, err = g.GetMany(context.Background(), []string{"fine", ""})
	var me *corral.ManyError
	var le *corral.LimitError
	fmt.Println(errors.As(err, &me), len(me.Errors), errors.As(err, &le), le.Limit)
	// Output: true 1 true key
}
