package input

import (
	"math"
	"math/big"
	"math/bits"
)

// Decimals of 16 to 19 digits, which the exact fast path of parseFloat64
// cannot take (their mantissa may not fit a float64's 53 bits), are most
// of a CSV of computed values: strconv.FormatFloat's shortest form of a
// float64 has 16 or 17 digits. strconv.ParseFloat reads them in about
// 60 ns, scanning the text again; eiselLemire converts the mantissa and
// power of ten the scanner already has in a few multiplications (the
// Eisel-Lemire algorithm, as strconv itself runs it after its own scan),
// and reports false in the rare cases it cannot decide, which go to
// strconv. Only the powers of ten such a decimal without an exponent can
// have, 10^-19 to 10^0, are tabulated.
const (
	elMinExp10 = -19
	elMaxExp10 = 0
)

// elPowers[e-elMinExp10] is 10^e's 128-bit mantissa, rounded down,
// normalized so that its top bit is set: {high, low} 64 bits.
var elPowers = func() [elMaxExp10 - elMinExp10 + 1][2]uint64 {
	var t [elMaxExp10 - elMinExp10 + 1][2]uint64
	mask := new(big.Int).SetUint64(math.MaxUint64)
	for e := elMinExp10; e <= elMaxExp10; e++ {
		// floor(2^k / 10^-e) for the k that gives exactly 128 bits.
		den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-e)), nil)
		k := 127 + den.BitLen()
		q := new(big.Int).Quo(new(big.Int).Lsh(big.NewInt(1), uint(k)), den)
		if q.BitLen() > 128 {
			q.Quo(new(big.Int).Lsh(big.NewInt(1), uint(k-1)), den)
		}
		lo := new(big.Int).And(q, mask).Uint64()
		hi := new(big.Int).Rsh(q, 64).Uint64()
		t[e-elMinExp10] = [2]uint64{hi, lo}
	}
	return t
}()

// eiselLemire returns ±man × 10^exp10 rounded to the nearest float64, or
// false when exp10 is outside the table or the result is ambiguous at 128
// bits (the caller then asks strconv).
func eiselLemire(man uint64, exp10 int, neg bool) (float64, bool) {
	if exp10 < elMinExp10 || exp10 > elMaxExp10 {
		return 0, false
	}
	if man == 0 {
		if neg {
			return math.Copysign(0, -1), true
		}
		return 0, true
	}
	pow := elPowers[exp10-elMinExp10]
	// Normalize the mantissa; 217706*e>>16 is floor(log2(10^e)).
	clz := bits.LeadingZeros64(man)
	man <<= uint(clz)
	exp2 := uint64(217706*exp10>>16+64+1023) - uint64(clz)
	hi, lo := bits.Mul64(man, pow[0])
	// The product's low bits may be all ones, where the truncated power's
	// missing bits could carry into them: widen with its low half.
	if hi&0x1FF == 0x1FF && lo+man < man {
		yHi, yLo := bits.Mul64(man, pow[1])
		mHi, mLo := hi, lo+yHi
		if mLo < lo {
			mHi++
		}
		if mHi&0x1FF == 0x1FF && mLo+1 == 0 && yLo+man < man {
			return 0, false
		}
		hi, lo = mHi, mLo
	}
	// Keep 54 bits, then round half to even to 53.
	msb := hi >> 63
	mant := hi >> (msb + 9)
	exp2 -= 1 ^ msb
	if lo == 0 && hi&0x1FF == 0 && mant&3 == 1 {
		return 0, false // exactly halfway: strconv decides
	}
	mant += mant & 1
	mant >>= 1
	if mant>>53 > 0 {
		mant >>= 1
		exp2++
	}
	if exp2-1 >= 0x7FF-1 {
		return 0, false // subnormal or infinite: not for this path
	}
	b := exp2<<52 | mant&(1<<52-1)
	if neg {
		b |= 1 << 63
	}
	return math.Float64frombits(b), true
}
