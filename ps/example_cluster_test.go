package ps_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/model"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/store"
)

// A cluster of one server and two workers in this process trains a
// softmax model for 20 clocks: the program the package doc opens with.
func Example() {
	ctx := context.Background()
	train, _, _ := model.Synthetic(model.SyntheticConfig{Train: 2000, Test: 1, Seed: 1})
	m := model.NewSoftmax(train.D, train.Classes)
	c, err := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 1, Workers: 2, Policy: epsp.NewSSP(1),
		Store: store.Config{Optimizer: store.SGD{LR: 0.5}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	tc := ps.TrainConfig{Keys: []uint64{0}, Lens: []int{m.NumParams()}, Init: store.Zeros{}, Clocks: 20}
	stats, err := c.Train(ctx, ps.FromModel(m, train), ps.ShardSampler{N: train.N, Workers: 2}, tc)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("workers:", len(stats), "loss fell:", stats[0].Loss[19] < stats[0].Loss[0])
	// Output: workers: 2 loss fell: true
}

// Training a model.Model on a cluster in this process, its parameters in
// two keys, and evaluating the result.
func ExampleFromModel() {
	ctx := context.Background()
	train, test, _ := model.Synthetic(model.SyntheticConfig{Train: 3000, Test: 500, Seed: 1})
	m := model.NewSoftmax(train.D, train.Classes)
	init := make([]float32, m.NumParams())
	m.Init(init, rand.New(rand.NewPCG(1, 2)))

	c, _ := ps.NewCluster(ctx, ps.ClusterConfig{Servers: 2, Workers: 3, Policy: epsp.NewSSP(2),
		Store: store.Config{Optimizer: store.SGD{LR: 0.5}}})
	defer c.Close()
	tc := ps.TrainConfig{Keys: []uint64{0, 1}, Lens: []int{100, len(init) - 100}, Init: vec(init), Clocks: 50}
	if _, err := c.Train(ctx, ps.FromModel(m, train), ps.ShardSampler{N: train.N, Workers: 3}, tc); err != nil {
		fmt.Println(err)
		return
	}
	p := make([]float32, len(init))
	c.Client().Pull(ctx, tc.Keys, p, tc.Lens)
	_, acc := m.Evaluate(p, test, nil)
	fmt.Println("accuracy above 0.8:", acc > 0.8)
	// Output: accuracy above 0.8: true
}

// vec initialises key k from its slice of one parameter vector (keys 0
// and 1 hold values [0,100) and [100,n)).
type vec []float32

func (v vec) Init(key uint64, off int, vals []float32) { copy(vals, v[int(key)*100+off:]) }
