package main

import (
	"math"
	"strconv"
	"strings"
)

// javaDouble formats x the way java.lang.Double.toString does for the
// values coflowsim prints: plain decimal with at least one fractional digit
// when 1e-3 ≤ |x| < 1e7, otherwise d.dddE<exp>. Digits are Go's shortest
// round-trip digits, which equal Java's for the integral and short values
// coflowsim prints.
func javaDouble(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "Infinity"
	case math.IsInf(x, -1):
		return "-Infinity"
	case x == 0:
		if math.Signbit(x) {
			return "-0.0"
		}
		return "0.0"
	}
	a := math.Abs(x)
	if a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(x, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(x, 'e', -1, 64) // e.g. 2.62144e+07
	mant, exp, _ := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}
