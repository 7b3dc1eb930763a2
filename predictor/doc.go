// Package predictor predicts the compression speed, decompression speed and
// ratio of a codec on a host from its recent measurements, so that a coflow
// scheduler (package fvdf) can decide online whether compressing a flow pays.
//
// # Overview
//
// A [Predictor] observes [Measurement] values and predicts the next one as an
// [Estimate]. Before its first observation every predictor answers
// [Config].Default (by default [DefaultEstimate]). [Keyed] keeps one predictor
// per key, e.g. per [HostCodec]. [New] builds a predictor by name:
//
//   - "last": [LastValue], the persistence forecast;
//   - "ewma": [EWMA], an exponentially weighted moving average;
//   - "ar": [AR], an AR(p) model on log values fitted by least squares.
//
// # Usage
//
//	p, err := predictor.NewKeyedByName[predictor.HostCodec]("ewma", predictor.Config{})
//	...
//	p.Observe(predictor.HostCodec{Host: "w3", Codec: "lz4"}, m)
//	est := p.Predict(predictor.HostCodec{Host: "w3", Codec: "lz4"})
package predictor
