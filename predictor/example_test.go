package predictor_test

import (
	"bytes"
	"fmt"
	"math"

	"github.com/falconml/falcon/predictor"
)

// EWMA smooths each component; before any observation it answers the
// configured default.
func ExampleEWMA() {
	p := predictor.NewEWMA(0.5, predictor.Estimate{CompressSpeed: 300e6, DecompressSpeed: 1e9, Ratio: 0.6})
	fmt.Printf("before: %.0f MB/s\n", p.Predict().CompressSpeed/1e6)
	for _, mbps := range []float64{400, 200, 200, 600} {
		p.Observe(predictor.Measurement{CompressSpeed: mbps * 1e6, DecompressSpeed: 3 * mbps * 1e6, Ratio: 0.5})
		e := p.Predict()
		fmt.Printf("after %3.0f: %.0f MB/s (decompress %.0f MB/s, ratio %.2f)\n", mbps, e.CompressSpeed/1e6, e.DecompressSpeed/1e6, e.Ratio)
	}
	// Output:
	// before: 300 MB/s
	// after 400: 400 MB/s (decompress 1200 MB/s, ratio 0.50)
	// after 200: 300 MB/s (decompress 900 MB/s, ratio 0.50)
	// after 200: 250 MB/s (decompress 750 MB/s, ratio 0.50)
	// after 600: 425 MB/s (decompress 1275 MB/s, ratio 0.50)
}

// A scheduler keeps one predictor per (host, codec), chosen by name.
func ExampleKeyed() {
	k, err := predictor.NewKeyedByName[predictor.HostCodec]("last", predictor.Config{})
	if err != nil {
		panic(err)
	}
	w1lz4 := predictor.HostCodec{Host: "w1", Codec: "lz4"}
	_ = k.Observe(w1lz4, predictor.Measurement{CompressSpeed: 750e6, DecompressSpeed: 4e9, Ratio: 0.28})
	fmt.Printf("w1/lz4: %.0f MB/s, ratio %.2f\n", k.Predict(w1lz4).CompressSpeed/1e6, k.Predict(w1lz4).Ratio)
	unseen := k.Predict(predictor.HostCodec{Host: "w2", Codec: "snappy"})
	fmt.Printf("w2/snappy (default): %.0f MB/s, ratio %.2f\n", unseen.CompressSpeed/1e6, unseen.Ratio)
	// Output:
	// w1/lz4: 750 MB/s, ratio 0.28
	// w2/snappy (default): 300 MB/s, ratio 0.60
}

// A tiny LSTM trained with a fixed seed on a synthetic series whose log
// speed is a sine of period 20 learns the cycle, which the persistence
// forecast cannot; the network is then saved and loaded back.
func ExampleRNN() {
	speed := func(t int) float64 { return 1e9 * math.Exp(0.5*math.Sin(2*math.Pi*float64(t)/20)) }
	var series []predictor.Measurement
	for t := 0; t < 600; t++ {
		s := speed(t)
		series = append(series, predictor.Measurement{CompressSpeed: s, DecompressSpeed: 3 * s, Ratio: 0.5})
	}
	cfg := predictor.Config{RNN: predictor.RNNConfig{Hidden: 8, Window: 10, Epochs: 40, Seed: 1, OnlineSteps: -1}}
	p, err := predictor.NewRNN(cfg)
	if err != nil {
		panic(err)
	}
	if err := p.Fit(series[:500]); err != nil {
		panic(err)
	}
	last := predictor.NewLastValue(predictor.Estimate{})
	_ = predictor.Warm(last, series[:500])
	rl := predictor.Evaluate(last, series, 500, 1)
	rp := predictor.Evaluate(p, series, 500, 1)
	fmt.Printf("held-out MAPE: lstm %.2f, last value %.2f\n", rp.MAPE, rl.MAPE)
	for t := 600; t < 605; t++ { // keep predicting past the end of the data
		fmt.Printf("t=%d predicted %4.0f MB/s, true %4.0f MB/s\n", t, math.Round(p.Predict().CompressSpeed/1e7)*10, math.Round(speed(t)/1e7)*10)
		s := speed(t)
		p.Observe(predictor.Measurement{CompressSpeed: s, DecompressSpeed: 3 * s, Ratio: 0.5})
	}

	var buf bytes.Buffer
	if err := p.Network().Save(&buf); err != nil {
		panic(err)
	}
	n, err := predictor.Load(&buf)
	if err != nil {
		panic(err)
	}
	fmt.Println("loaded:", n.Cell, "hidden", n.Hidden, "parameters", len(n.Params))
	// Output:
	// held-out MAPE: lstm 0.00, last value 0.10
	// t=600 predicted 1000 MB/s, true 1000 MB/s
	// t=601 predicted 1170 MB/s, true 1170 MB/s
	// t=602 predicted 1340 MB/s, true 1340 MB/s
	// t=603 predicted 1500 MB/s, true 1500 MB/s
	// t=604 predicted 1610 MB/s, true 1610 MB/s
	// loaded: lstm hidden 8 parameters 795
}
