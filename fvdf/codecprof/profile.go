package codecprof

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/falconml/falcon/transport"
)

// Errors returned by this package. Check them with errors.Is.
var (
	ErrUnknownClass = errors.New("codecprof: unknown data class")
	ErrUnknownCodec = errors.New("codecprof: unknown codec")
	ErrBadMix       = errors.New("codecprof: bad data mix")
	ErrNoProfile    = errors.New("codecprof: no profile")
	ErrBadConfig    = errors.New("codecprof: invalid config")
)

// Profile is the measured behaviour of one codec on one data class (or on a
// mix of classes), per CPU core.
type Profile struct {
	Codec transport.Codec
	// Class is the data class; meaningless for a profile returned by
	// [Profiles.ForMix].
	Class Class
	// CompressBps is raw bytes compressed per second by one core (s).
	CompressBps float64
	// DecompressBps is raw (decoded) bytes produced per second by one core
	// when decompressing (u).
	DecompressBps float64
	// Ratio is compressed bytes / raw bytes (ρ, may exceed 1 slightly on
	// incompressible data).
	Ratio float64
}

// String formats p for logs.
func (p Profile) String() string {
	return fmt.Sprintf("%s/%s s=%.0fMB/s u=%.0fMB/s rho=%.3f", p.Codec, p.Class,
		p.CompressBps/1e6, p.DecompressBps/1e6, p.Ratio)
}

// Profiles holds one Profile per (codec, class) pair.
type Profiles struct {
	Entries []Profile
}

// Lookup returns the profile of codec c on class k.
func (ps Profiles) Lookup(c transport.Codec, k Class) (Profile, bool) {
	for _, p := range ps.Entries {
		if p.Codec == c && p.Class == k {
			return p, true
		}
	}
	return Profile{}, false
}

// Codecs returns the distinct codecs in ps, in ascending order.
func (ps Profiles) Codecs() []transport.Codec {
	seen := map[transport.Codec]bool{}
	var out []transport.Codec
	for _, p := range ps.Entries {
		if !seen[p.Codec] {
			seen[p.Codec] = true
			out = append(out, p.Codec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ForMix returns the effective profile of codec c on a payload made of the
// classes in m, weighted by raw bytes (weights are normalised):
//
//	ρ   = Σ_k w_k ρ_k
//	1/s = Σ_k w_k / s_k      (time per raw byte adds up)
//	1/u = Σ_k w_k / u_k
//
// It returns ErrNoProfile if a class with positive weight has no profile.
func (ps Profiles) ForMix(c transport.Codec, m Mix) (Profile, error) {
	w, err := m.normalized()
	if err != nil {
		return Profile{}, err
	}
	var rho, invS, invU float64
	for _, k := range Classes() {
		if w[k] == 0 {
			continue
		}
		p, ok := ps.Lookup(c, k)
		if !ok {
			return Profile{}, fmt.Errorf("%w: codec %s class %s", ErrNoProfile, c, k)
		}
		rho += w[k] * p.Ratio
		invS += w[k] / p.CompressBps
		invU += w[k] / p.DecompressBps
	}
	return Profile{Codec: c, Class: -1, CompressBps: 1 / invS, DecompressBps: 1 / invU, Ratio: rho}, nil
}

// Best returns, among the codecs in ps, the mix profile that disposes of
// volume fastest on a link of bandwidth bps bytes/s with one core at each
// end (pipelined disposal rate min(s, bps/ρ, u)); ties go to the lower
// codec id. ok is false when no codec beats raw transfer.
func (ps Profiles) Best(m Mix, bps float64) (best Profile, ok bool, err error) {
	bestRate := bps
	for _, c := range ps.Codecs() {
		p, err := ps.ForMix(c, m)
		if err != nil {
			return Profile{}, false, err
		}
		r := math.Min(p.CompressBps, math.Min(bps/p.Ratio, p.DecompressBps))
		if r > bestRate {
			best, bestRate, ok = p, r, true
		}
	}
	return best, ok, nil
}

// Mix is a payload made of several data classes; the value is the class's
// share of raw bytes (weights need not sum to one; they are normalised).
type Mix map[Class]float64

// ShuffleMix is the documented default mix: a shuffle/parameter-server
// workload dominated by numeric tensors with some record text and some
// already-compressed blobs. The weights are ours, fixed before any
// scheduling experiment was run, chosen to resemble a mixed ML-pipeline
// cluster (dense gradients 30 %, sparse gradients 20 %, quantized values
// 10 %, text records 25 %, already-compressed data 15 %).
func ShuffleMix() Mix {
	return Mix{Float32Grad: 0.30, SparseGrad: 0.20, Int8Quant: 0.10, Text: 0.25, Random: 0.15}
}

// Only returns the mix made of class k alone.
func Only(k Class) Mix { return Mix{k: 1} }

func (m Mix) normalized() (map[Class]float64, error) {
	for k, w := range m {
		if k < 0 || k >= numClasses {
			return nil, fmt.Errorf("%w: %v", ErrUnknownClass, k)
		}
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("%w: weight %v for %s", ErrBadMix, w, k)
		}
	}
	// Summed in class order, not map order, so the result is the same on
	// every call.
	var sum float64
	for _, k := range Classes() {
		sum += m[k]
	}
	if sum <= 0 {
		return nil, fmt.Errorf("%w: weights sum to zero", ErrBadMix)
	}
	out := make(map[Class]float64, len(m))
	for k, w := range m {
		out[k] = w / sum
	}
	return out, nil
}

// String formats m as ParseMix accepts it, classes in declaration order.
func (m Mix) String() string {
	var parts []string
	for _, k := range Classes() {
		if w, ok := m[k]; ok {
			parts = append(parts, k.String()+"="+strconv.FormatFloat(w, 'g', -1, 64))
		}
	}
	return strings.Join(parts, ",")
}

// ParseMix parses "shuffle" (the [ShuffleMix]), a declared mix's name
// ([NamedMixes]: "spark-sql-shuffle", "ml-ps"), a single class name
// ("text"), or comma-separated class=weight pairs ("float32=0.5,text=0.5").
func ParseMix(s string) (Mix, error) {
	s = strings.TrimSpace(s)
	if s == "shuffle" || s == "mix" || s == "" {
		return ShuffleMix(), nil
	}
	if n, err := LookupMix(s); err == nil {
		return n.Mix(), nil
	}
	if !strings.Contains(s, "=") {
		k, err := ParseClass(s)
		if err != nil {
			return nil, err
		}
		return Only(k), nil
	}
	m := Mix{}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not class=weight", ErrBadMix, part)
		}
		k, err := ParseClass(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		w, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("%w: weight %q: %v", ErrBadMix, val, err)
		}
		m[k] += w
	}
	if _, err := m.normalized(); err != nil {
		return nil, err
	}
	return m, nil
}
