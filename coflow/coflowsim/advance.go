package coflowsim

import "math"

// advance applies up to k quanta of the reference simulator's per-flow
// update
//
//	x -= min(b, x);  done when x <= z
//
// and returns the new x and the quantum (1..k) at which x first dropped to
// z or below, or 0 if that did not happen within k quanta (or never can:
// b too small to change x). It requires x > z.
//
// The result is bit for bit the one of k sequential float64 subtractions,
// computed in O(number of binades crossed) steps: while x stays inside one
// binade [lo, 2lo) its ulp u is fixed, x is an integer multiple of u, and
// fl(x - b) = x - c with c = b rounded to the nearest multiple of u (unless
// b/u falls exactly half-way, which is stepped one quantum at a time).
func advance(x, b, z float64, k int64) (float64, int64) {
	if b <= 0 || k <= 0 {
		return x, 0
	}
	var i int64
	for i < k {
		if b >= x {
			return 0, i + 1
		}
		_, e := math.Frexp(x) // x in [2^(e-1), 2^e)
		lo := math.Ldexp(1, e-1)
		u := math.Ldexp(1, e-53)
		var m int64
		var C float64
		if lo > z && u > 0 {
			q := b / u // exact: u is a power of two
			qr := math.Floor(q)
			switch frac := q - qr; {
			case frac < 0.5:
				C = qr
			case frac > 0.5:
				C = qr + 1
			}
			if C > 0 {
				X := x / u
				L := lo / u // 2^52
				if room := X - L - 1; room >= C {
					mf := math.Floor(room / C)
					if mf > float64(k-i) {
						mf = float64(k - i)
					}
					m = int64(mf)
					x = (X - mf*C) * u
					i += m
				}
			}
		}
		if m == 0 {
			nx := x - b
			i++
			if nx <= z {
				return nx, i
			}
			if nx == x {
				return x, 0 // stuck for good: b is below half an ulp of x
			}
			x = nx
		}
	}
	return x, 0
}

// accumulate applies k quanta of the reference simulator's bookkeeping of
// a coflow's bytes sent,
//
//	for each b in bs: x += b
//
// and returns the new x, bit for bit the result of the k·len(bs)
// sequential float64 additions (k >= 0, x >= 0, bs >= 0). Inside one
// binade [lo, 2lo) of x its ulp u is fixed, x is a multiple of u and
// fl(x + b) = x + c with c = b rounded to the nearest multiple of u, as
// long as the result stays in the binade; so whole quanta add D = Σc at
// once, and only quanta that may leave the binade, or hold a tie (b/u
// half-way, rounded to even), or start from 0 or a subnormal x, are
// stepped one addition at a time. The loop costs O(len(bs) · binades
// crossed).
func accumulate(x float64, bs []float64, k int64) float64 {
	for k > 0 {
		if x >= 0x1p-1022 {
			_, e := math.Frexp(x) // x in [2^(e-1), 2^e)
			u := math.Ldexp(1, e-53)
			D, tie := ulpSteps(bs, u)
			if D == 0 && !tie {
				return x // every b is below half an ulp: x never changes
			}
			if !tie && D < 1<<53 {
				X := int64(x / u)                             // in [2^52, 2^53)
				if m := min((1<<53-1-X)/int64(D), k); m > 0 { // the last result stays below 2lo
					x = float64(X+m*int64(D)) * u
					k -= m
					continue
				}
			}
		}
		for _, b := range bs {
			x += b
		}
		k--
	}
	return x
}

// ulpSteps rounds each b to the nearest multiple of u (a power of two, so
// b/u is exact) and returns the sum of the multiples, D, and whether some
// b lies exactly half-way (a tie, rounded to even by the float64 add or
// subtract, which the caller then steps one operation at a time).
func ulpSteps(bs []float64, u float64) (D float64, tie bool) {
	for _, b := range bs {
		q := b / u
		qr := math.Floor(q)
		switch frac := q - qr; {
		case frac < 0.5:
			D += qr
		case frac > 0.5:
			D += qr + 1
		default:
			tie = true
		}
	}
	return D, tie
}

// drain applies k quanta of the reference simulator's bookkeeping of a
// reducer's bytes left,
//
//	for each b in bs: acc -= b
//
// and returns the new acc, bit for bit the result of the k·len(bs)
// sequential float64 subtractions (bs >= 0). Inside one binade [lo, 2lo)
// of acc its ulp u is fixed, acc is a multiple of u and fl(acc − b) =
// acc − c with c = b rounded to the nearest multiple of u, as long as the
// result stays in the binade; so whole quanta subtract D = Σc at once, and
// only quanta that may leave the binade, or hold a tie (b/u half-way,
// rounded to even), are stepped one subtraction at a time. The loop costs
// O(len(bs) · binades crossed).
func drain(acc float64, bs []float64, k int64) float64 {
	for k > 0 {
		if acc > 0x1p-1022 {
			_, e := math.Frexp(acc) // acc in [2^(e-1), 2^e)
			u := math.Ldexp(1, e-53)
			D, tie := ulpSteps(bs, u)
			if D == 0 && !tie {
				return acc // every b is below half an ulp: acc never changes
			}
			if !tie && D < 1<<53 {
				X := int64(acc / u)                           // in [2^52, 2^53)
				if m := min((X-1<<52-1)/int64(D), k); m > 0 { // the last result stays above lo
					acc = float64(X-m*int64(D)) * u
					k -= m
					continue
				}
			}
		}
		for _, b := range bs {
			acc -= b
		}
		k--
	}
	return acc
}
