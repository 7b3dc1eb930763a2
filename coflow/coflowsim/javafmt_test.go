package coflowsim

import (
	"math"
	"testing"
)

// Expected strings are Java's Double.toString output.
func TestJavaDouble(t *testing.T) {
	cases := []struct {
		v    float64
		want string
	}{
		{0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {16, "16.0"}, {5760, "5760.0"},
		{3620560, "3620560.0"}, {9999999, "9999999.0"}, {1e7, "1.0E7"}, {2.62144e7, "2.62144E7"},
		{2097152, "2097152.0"}, {9.60495616e8, "9.60495616E8"}, {2.4782045184e10, "2.4782045184E10"},
		{0.001, "0.001"}, {0.5, "0.5"}, {1.5e-4, "1.5E-4"}, {-2.5, "-2.5"}, {123.456, "123.456"},
		{math.Inf(1), "Infinity"}, {math.NaN(), "NaN"},
	}
	for _, c := range cases {
		if got := javaDouble(c.v); got != c.want {
			t.Errorf("javaDouble(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}
