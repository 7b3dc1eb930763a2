// Command predictor trains and evaluates the compression-speed predictors of
// package predictor on a recorded series of real lz4 and snappy
// measurements, and prints a table plus one machine-readable line per
// predictor and series:
//
//	predictor=<name> series=<name> mape=<float> rmse=<float> predict_ns=<float> update_ns=<float>
//
// Usage:
//
//	go run ./examples/predictor                      # the committed series (predictor/testdata/series.csv)
//	go run ./examples/predictor -series my.csv       # another recorded series
//	go run ./examples/predictor -record -chunks 2000 -seed 7 -out new.csv   # record a fresh one first
//
// Each codec's series is split in time: the first -train fraction is the
// training part, the rest is held out. Hyper-parameters are fixed a priori
// (the package defaults) or chosen on a validation split inside the
// training part (ewma-tuned's α, the RNNs' epoch count); the held-out part
// is only scored. lstm-scratch is never fitted: it learns online only,
// from its seed, while the training part is replayed. During scoring every predictor keeps observing (and the
// RNNs keep fine-tuning online, except lstm-frozen), as it would in use.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/falconml/falcon/internal/cputime"
	"github.com/falconml/falcon/predictor"
	"github.com/falconml/falcon/predictor/record"
)

func main() {
	var (
		seriesPath = flag.String("series", "", "recorded series CSV (default: the committed predictor/testdata/series.csv)")
		rec        = flag.Bool("record", false, "record a fresh series instead of reading one")
		chunks     = flag.Int("chunks", 2000, "with -record: chunks to measure (each with every codec)")
		recSeed    = flag.Uint64("record-seed", 1, "with -record: seed of the class/contention schedule and data")
		out        = flag.String("out", "", "with -record: also write the series to this CSV file")
		trainFrac  = flag.Float64("train", 0.6, "fraction of each series used for training (the rest is held out)")
		span       = flag.Int("span", 5, "steps after a class/contention change counted as 'around regime changes'")
		names      = flag.String("predictors", "last,ewma,ewma-tuned,ar,lstm,lstm-frozen,lstm-scratch,gru", "comma-separated predictors")
		hidden     = flag.Int("hidden", 0, "RNN hidden size (0 = package default)")
		window     = flag.Int("window", 0, "RNN BPTT window (0 = package default)")
		seed       = flag.Uint64("seed", 1, "RNN initialisation seed")
		saveDir    = flag.String("save", "", "if set, save each trained RNN to DIR/<series>-<predictor>.model")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, opts{*seriesPath, *rec, *chunks, *recSeed, *out, *trainFrac, *span, *names, *hidden, *window, *seed, *saveDir}); err != nil {
		fmt.Fprintln(os.Stderr, "predictor:", err)
		os.Exit(1)
	}
}

type opts struct {
	series         string
	record         bool
	chunks         int
	recSeed        uint64
	out            string
	trainFrac      float64
	span           int
	names          string
	hidden, window int
	seed           uint64
	saveDir        string
}

func run(ctx context.Context, w io.Writer, o opts) error {
	if !(o.trainFrac > 0.1 && o.trainFrac < 0.95) {
		return fmt.Errorf("-train %v must be in (0.1, 0.95)", o.trainFrac)
	}
	recs, stem, err := load(ctx, o)
	if err != nil {
		return err
	}
	codecs, by := predictor.Split(recs)
	type row struct {
		series, name string
		r            predictor.Result
		predict      cost
		update       cost
	}
	var rows []row
	for _, codec := range codecs {
		s := by[codec]
		seriesName := stem + ":" + codec
		from := int(float64(len(s)) * o.trainFrac)
		train := s[:from]
		for _, name := range strings.Split(o.names, ",") {
			name = strings.TrimSpace(name)
			p, frozen, err := build(name, o, train)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", name, seriesName, err)
			}
			res := predictor.Evaluate(p, s, from, o.span)
			pns := timePredict(frozen, s[from:])
			var uns cost
			if rnn, ok := p.(*predictor.RNN); ok && name != "lstm-frozen" {
				uns = timeUpdate(rnn)
			}
			if rnn, ok := p.(*predictor.RNN); ok && o.saveDir != "" {
				path := filepath.Join(o.saveDir, strings.ReplaceAll(seriesName, ":", "-")+"-"+name+".model")
				if err := rnn.Network().SaveFile(path); err != nil {
					return err
				}
			}
			rows = append(rows, row{seriesName, name, res, pns, uns})
		}
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "series\tpredictor\tMAPE\t×EWMA\tRMSE MB/s\tMAPE@regime\tMAPE steady\tdecomp MAPE\tratio MAPE\tpredict ns cpu (wall)\tupdate ns cpu (wall)\t")
	ewma := map[string]float64{}
	for _, r := range rows {
		if r.name == "ewma" {
			ewma[r.series] = r.r.MAPE
		}
	}
	for _, r := range rows {
		rel := "-"
		if e, ok := ewma[r.series]; ok && e > 0 {
			rel = fmt.Sprintf("%.2f", r.r.MAPE/e)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%s\t%.0f\t%.3f (n=%d)\t%.3f\t%.3f\t%.3f\t%.0f (%.0f)\t%.0f (%.0f)\t\n", r.series, r.name, r.r.MAPE, rel,
			r.r.RMSE/1e6, r.r.RegimeMAPE, r.r.RegimeN, r.r.SteadyMAPE, r.r.DecompMAPE, r.r.RatioMAPE,
			r.predict.cpu, r.predict.wall, r.update.cpu, r.update.wall)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "predictor=%s series=%s mape=%.4f rmse=%.4g predict_ns=%.0f update_ns=%.0f\n",
			r.name, r.series, r.r.MAPE, r.r.RMSE, r.predict.ns(), r.update.ns())
	}
	return nil
}

// build returns the predictor called name, trained or warmed on train, and
// a second, frozen instance (no online learning) for timing predictions.
func build(name string, o opts, train []predictor.Measurement) (p, frozen predictor.Predictor, err error) {
	cfg := predictor.Config{RNN: predictor.RNNConfig{Hidden: o.hidden, Window: o.window, Seed: o.seed}}
	base := name
	switch name {
	case "ewma-tuned":
		base = predictor.NameEWMA
		// α chosen on the last 20 % of the training part only.
		if cfg.Alpha, err = predictor.TuneAlpha(train, 0.2, nil); err != nil {
			return nil, nil, err
		}
	case "lstm-frozen":
		base = predictor.NameLSTM
		cfg.RNN.OnlineSteps = -1
	case "lstm-scratch":
		// Never fitted: learns online only (what New("lstm", cfg) gives a
		// scheduler that has no trained model), replaying the training part.
		p, err = predictor.New(predictor.NameLSTM, cfg)
		if err != nil {
			return nil, nil, err
		}
		predictor.Replay(p, train)
		fc := cfg
		fc.RNN.Model = p.(*predictor.RNN).Network().Clone()
		fc.RNN.OnlineSteps = -1
		if frozen, err = predictor.New(predictor.NameLSTM, fc); err != nil {
			return nil, nil, err
		}
		predictor.Replay(frozen, train)
		return p, frozen, nil
	}
	if p, err = predictor.New(base, cfg); err != nil {
		return nil, nil, err
	}
	if err = predictor.Warm(p, train); err != nil {
		return nil, nil, err
	}
	if rnn, ok := p.(*predictor.RNN); ok {
		fc := cfg
		fc.RNN.Model = rnn.Network().Clone()
		fc.RNN.OnlineSteps = -1
		frozen, err = predictor.New(base, fc)
	} else {
		frozen, err = predictor.New(base, cfg)
	}
	if err != nil {
		return nil, nil, err
	}
	predictor.Replay(frozen, train)
	return p, frozen, nil
}

// cost is a mean cost per operation: wall-clock and process CPU time (the
// CPU time is 0 where unsupported). On a machine shared with other jobs the
// wall time includes time the process was not running; the CPU time does not.
type cost struct{ wall, cpu float64 }

// ns returns the CPU time if known, else the wall time.
func (c cost) ns() float64 {
	if c.cpu > 0 {
		return c.cpu
	}
	return c.wall
}

func measure(n int, f func()) cost {
	c0, t0 := cputime.Process(), time.Now()
	f()
	wall, cpu := time.Since(t0), cputime.Process()-c0
	if n < 1 {
		n = 1
	}
	return cost{float64(wall.Nanoseconds()) / float64(n), float64(cpu.Nanoseconds()) / float64(n)}
}

// timePredict returns the mean cost of Observe+Predict (one inference step,
// no online learning) over test, repeated reps times.
func timePredict(p predictor.Predictor, test []predictor.Measurement) cost {
	const reps = 5
	var sink float64
	c := measure(reps*len(test), func() {
		for r := 0; r < reps; r++ {
			for _, m := range test {
				p.Observe(m)
				sink += p.Predict().CompressSpeed
			}
		}
	})
	_ = sink
	return c
}

// timeUpdate returns the mean cost of one online update (FineTune).
func timeUpdate(p *predictor.RNN) cost {
	const n = 500
	if !p.FineTune() {
		return cost{}
	}
	return measure(n, func() {
		for i := 0; i < n; i++ {
			p.FineTune()
		}
	})
}

func load(ctx context.Context, o opts) ([]predictor.Record, string, error) {
	if o.record {
		var recs []predictor.Record
		cfg := record.Config{Chunks: o.chunks, Seed: o.recSeed}
		fmt.Fprintf(os.Stderr, "recording %d chunks × %d codecs...\n", o.chunks, len(record.Codecs))
		if err := record.Record(ctx, cfg, func(r predictor.Record) error { recs = append(recs, r); return nil }); err != nil {
			return nil, "", err
		}
		if o.out != "" {
			if err := writeCSV(o.out, recs); err != nil {
				return nil, "", err
			}
		}
		return recs, fmt.Sprintf("recorded-seed%d", o.recSeed), nil
	}
	path := o.series
	if path == "" {
		var err error
		if path, err = findCommitted(); err != nil {
			return nil, "", err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	recs, err := predictor.ReadCSV(bufio.NewReader(f))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return recs, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), nil
}

// findCommitted walks up from the working directory to the module root's
// predictor/testdata/series.csv.
func findCommitted() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "predictor", "testdata", "series.csv")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("committed series predictor/testdata/series.csv not found above the working directory; run from the repository or pass -series FILE or -record")
		}
		dir = parent
	}
}

func writeCSV(path string, recs []predictor.Record) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := predictor.WriteCSVHeader(w); err != nil {
		f.Close()
		return err
	}
	for _, r := range recs {
		if err := predictor.WriteCSVRow(w, r); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
