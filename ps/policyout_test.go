package ps_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/falconml/falcon/epsp"
	"github.com/falconml/falcon/ps"
	"github.com/falconml/falcon/ps/pstest"
	"github.com/falconml/falcon/ps/store"
)

// badPolicy is BSP with a broken push decision, or one that never
// releases anyone.
type badPolicy struct {
	epsp.Policy
	scale  float64
	silent bool
}

func (p *badPolicy) Name() string { return "bad-policy" }

func (p *badPolicy) Admit(now time.Duration, v epsp.View, push epsp.Push) epsp.PushDecision {
	if p.silent {
		return p.Policy.Admit(now, v, push)
	}
	return epsp.PushDecision{Scale: p.scale}
}

func (p *badPolicy) Step(now time.Duration, v epsp.View, e epsp.Event) epsp.Output {
	if p.silent {
		return epsp.Output{}
	}
	return p.Policy.Step(now, v, e)
}

// A live run with a policy that answers a NaN scale fails with an error
// naming the policy and the field (before: "ps: malformed message ...
// (from server-0)"), and one that never releases anyone is reported as a
// stall (before: the caller's context deadline).
func TestLive_PolicyOutputNamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		pol  *badPolicy
		want []string
	}{
		{"nan scale", &badPolicy{Policy: epsp.NewASP(), scale: math.NaN()}, []string{"bad-policy", "Scale"}},
		{"negative scale", &badPolicy{Policy: epsp.NewASP(), scale: -1}, []string{"bad-policy", "Scale"}},
		{"stall", &badPolicy{Policy: epsp.NewBSP(), silent: true}, []string{"bad-policy", "stalled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := pstest.NewCluster(t, pstest.Workers(2), pstest.Policy(tc.pol))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.Train(ctx, linReg{n: 32}, ps.ShardSampler{N: 32, Workers: 2},
				ps.TrainConfig{Keys: []uint64{0}, Lens: []int{2}, Init: store.Zeros{}, Clocks: 5})
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Train = %v, want the policy's fault", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
