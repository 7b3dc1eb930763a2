package coflowsim

import (
	"math"
	"strconv"
	"strings"
)

// javaDouble formats v the way Java's Double.toString does (JDK 19 and
// later: the shortest digits that round-trip). Values with
// 1e-3 <= |v| < 1e7 are written in plain decimal with at least one
// fractional digit ("16.0", "5760.0"); others in computerized scientific
// notation ("2.62144E7", "1.0E-4"); zero is "0.0".
func javaDouble(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	case v == 0:
		if math.Signbit(v) {
			return "-0.0"
		}
		return "0.0"
	}
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
		v = -v
	}
	// Shortest round-trip digits and decimal exponent: d.ddd × 10^exp.
	s := strconv.FormatFloat(v, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	if v >= 1e-3 && v < 1e7 {
		if exp >= 0 {
			intLen := exp + 1
			for len(digits) < intLen {
				digits += "0"
			}
			b.WriteString(digits[:intLen])
			b.WriteByte('.')
			if frac := digits[intLen:]; frac != "" {
				b.WriteString(frac)
			} else {
				b.WriteByte('0')
			}
		} else {
			b.WriteString("0.")
			b.WriteString(strings.Repeat("0", -exp-1))
			b.WriteString(digits)
		}
		return b.String()
	}
	b.WriteByte(digits[0])
	b.WriteByte('.')
	if len(digits) > 1 {
		b.WriteString(digits[1:])
	} else {
		b.WriteByte('0')
	}
	b.WriteByte('E')
	b.WriteString(strconv.Itoa(exp))
	return b.String()
}
