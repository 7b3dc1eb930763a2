package predictor

import (
	"cmp"
	"slices"
)

// HostCodec is a convenience key for Keyed: one codec on one host (or port).
type HostCodec struct {
	Host  string
	Codec string
}

// Keyed keeps one Predictor per key (for example per (host, codec) pair),
// created on first use by a factory. Before a key is observed, Predict
// answers with a fresh predictor's default.
//
// Like every predictor it is a single-goroutine value.
type Keyed[K comparable] struct {
	factory func() (Predictor, error)
	m       map[K]Predictor
	def     Predictor // a never-observed predictor, for unknown keys
}

// NewKeyed returns a Keyed whose predictors are built by factory. The factory
// is called once immediately (its result answers unknown keys) so that a
// factory error is reported here and not later.
func NewKeyed[K comparable](factory func() (Predictor, error)) (*Keyed[K], error) {
	def, err := factory()
	if err != nil {
		return nil, err
	}
	return &Keyed[K]{factory: factory, m: make(map[K]Predictor), def: def}, nil
}

// NewKeyedByName returns a Keyed building predictors with New(name, cfg).
func NewKeyedByName[K comparable](name string, cfg Config) (*Keyed[K], error) {
	return NewKeyed[K](func() (Predictor, error) { return New(name, cfg) })
}

// Observe feeds m to k's predictor, creating it if needed. It returns the
// factory's error, if any (the factory already succeeded once in NewKeyed,
// so a deterministic factory never fails here).
func (p *Keyed[K]) Observe(k K, m Measurement) error {
	q, ok := p.m[k]
	if !ok {
		var err error
		if q, err = p.factory(); err != nil {
			return err
		}
		p.m[k] = q
	}
	q.Observe(m)
	return nil
}

// Predict returns k's estimate, or the default estimate if k was never observed.
func (p *Keyed[K]) Predict(k K) Estimate {
	if q, ok := p.m[k]; ok {
		return q.Predict()
	}
	return p.def.Predict()
}

// Get returns k's predictor and whether it exists.
func (p *Keyed[K]) Get(k K) (Predictor, bool) {
	q, ok := p.m[k]
	return q, ok
}

// Set installs q (for example a trained or loaded model) as k's predictor.
func (p *Keyed[K]) Set(k K, q Predictor) { p.m[k] = q }

// Len returns the number of keys observed or set.
func (p *Keyed[K]) Len() int { return len(p.m) }

// Keys returns the keys in the order given by cmpFn (map order is never exposed).
func (p *Keyed[K]) Keys(cmpFn func(a, b K) int) []K {
	out := make([]K, 0, len(p.m))
	for k := range p.m {
		out = append(out, k)
	}
	slices.SortFunc(out, cmpFn)
	return out
}

// CompareHostCodec orders HostCodec keys by host, then codec.
func CompareHostCodec(a, b HostCodec) int {
	if c := cmp.Compare(a.Host, b.Host); c != 0 {
		return c
	}
	return cmp.Compare(a.Codec, b.Codec)
}
