package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/fvdf"
	"github.com/falconml/falcon/predictor"
)

// Prediction in the loop and synthetic traces (PROTOCOL-v3, issue 29).

// DriftFile is the codec-speed recording the drift replays: 2000 chunks
// of 256 KiB, lz4 and snappy, recorded by predictor/record (seed 1) while
// the data changed class and background tasks started and stopped.
const DriftFile = "predictor/testdata/series.csv"

// DriftCodec is the codec whose recorded factors drive the drift (one
// factor for every codec: the recorder's contention slowed both).
const DriftCodec = "lz4"

// DriftStep is the simulated time one recorded chunk's factor lasts (the
// step of fvdf's modelled drift, DefaultContentionConfig).
const DriftStep = time.Second

// DriftWindow is the window of fvdf.RecordedFactors: the throughput of
// the last 30 recorded chunks (the recorder's shortest contention run,
// record.DefaultConfig's ContentionRun[0]; ours), so a step carries a
// contention level's sustained speed, not one chunk's scheduler stall.
// (PROTOCOL-v3 §6, amended 2026-12-05 before any deciding run.)
const DriftWindow = 30

// loadDrift reads the recording and returns its factors
// (fvdf.RecordedFactors of DriftCodec over DriftWindow).
func loadDrift(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("drift recording: %w", err)
	}
	defer f.Close()
	recs, err := predictor.ReadCSV(f)
	if err != nil {
		return nil, fmt.Errorf("drift recording %s: %w", path, err)
	}
	return fvdf.RecordedFactors(recs, DriftCodec, DriftWindow)
}

// basePred is the Pred of the cells that do not vary the predictor: the
// oracle under drift, none otherwise.
func (m *matrix) basePred() string {
	if len(m.o.preds) == 0 {
		return ""
	}
	return fvdf.PredictorOracle
}

// drifting builds a drifting cell's truth and estimator. The recorded
// factors are cut in two halves: predictors that train offline (LSTM,
// GRU, AR) fit the first, the run replays the second from step
// seed·137 mod its length (cycling), so seeds see different stretches of
// the same recording and no predictor is tested on what it trained on.
// The oracle knows the factor at decision time; other predictors learn
// from the speeds the simulator samples (fvdf.Predicted).
func (m *matrix) drifting(c Cell, seed uint64, fab *coflow.Fabric) (fvdf.Estimator, *fvdf.TrueSpeeds, error) {
	if len(m.o.drift) < 2 {
		return nil, nil, fmt.Errorf("%s: no drift recording loaded", c.key())
	}
	half := len(m.o.drift) / 2
	train, replay := m.o.drift[:half], m.o.drift[half:]
	cont, err := fvdf.NewReplayedContention(replay, DriftStep, int(seed*137)%len(replay))
	if err != nil {
		return nil, nil, err
	}
	truth := &fvdf.TrueSpeeds{Fabric: fab, Contention: cont}
	if c.Pred == fvdf.PredictorOracle {
		return fvdf.Oracle{Contention: cont}, truth, nil
	}
	p, err := fvdf.NewPredicted(c.Pred, predictor.Config{})
	if err != nil {
		return nil, nil, err
	}
	tc, err := fvdf.NewReplayedContention(train, DriftStep, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := p.Train(fab, tc, len(train)); err != nil {
		return nil, nil, err
	}
	truth.Sink = p.Observe
	return p, truth, nil
}

// SynthRefBps is the port bandwidth the synthetic loads refer to
// (1 Gbit/s); FB2010's offered load there is 0.55 (coflow.OfferedLoad).
const SynthRefBps = 125e6

// SynthLoads are the three loads of the synthetic traces: light, about
// FB2010's, and saturating (offered bytes over fabric capacity per second
// of the arrival window, at SynthRefBps).
var SynthLoads = []float64{0.25, 0.55, 1.0}

// SynthTrace is the synthetic trace of seed at load: coflow.Synthetic
// with FB2010's dimensions and bin mix (coflow.DefaultSynthConfig: 150
// ports, 526 coflows) and arrivals scaled to the load, drawn from
// PCG(seed, 0x73796e74). A matrix on synthetic traces draws one trace
// per seed, so its intervals span traces.
func SynthTrace(load float64, seed uint64) (*coflow.Trace, error) {
	cfg := coflow.DefaultSynthConfig()
	cfg.Load, cfg.PortBps = load, SynthRefBps
	return coflow.Synthetic(cfg, rand.New(rand.NewPCG(seed, 0x73796e74)))
}
