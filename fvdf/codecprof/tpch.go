package codecprof

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
)

// TPC-H lineitem rows (TPC-H specification 2.18, §4.2.3), encoded as Spark
// SQL shuffles them: each row in Spark's UnsafeRow layout (a null bitset of
// one 8-byte word for ≤ 64 fields, one 8-byte slot per field — integers,
// dates as days and decimals of precision ≤ 18 as unscaled longs, in
// little-endian; strings as (offset << 32 | length) into a variable-length
// region padded to 8 bytes), preceded by its 4-byte big-endian length, as
// UnsafeRowSerializer writes a shuffle block.
//
// Column values follow the specification's distributions at scale factor
// 1: L_ORDERKEY sparse (8 of every 32 keys used, 1–7 lines per order),
// L_PARTKEY uniform in [1, 200000], L_SUPPKEY derived from the part key,
// L_QUANTITY uniform in [1, 50], L_EXTENDEDPRICE = quantity × the part's
// retail price (90000 + (partkey/10 mod 20001) + 100·(partkey mod 1000))/100,
// L_DISCOUNT in [0.00, 0.10], L_TAX in [0.00, 0.08], ship/commit/receipt
// dates offset from an order date uniform in [1992-01-01, 1998-08-02],
// L_RETURNFLAG and L_LINESTATUS from the dates against 1995-06-17,
// L_SHIPINSTRUCT and L_SHIPMODE from their 4 and 7 values. L_COMMENT
// (10–43 characters) comes from a sentence grammar in the shape of the
// specification's text pool (§4.2.2.10) over a subset of its word lists,
// not from dbgen's 300 MB pool: this is a dbgen-like generator, not dbgen.
const tpchFields = 16

var (
	tpchInstruct = []string{"DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"}
	tpchMode     = []string{"REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"}
	tpchNouns    = strings.Fields("foxes ideas theodolites pinto_beans instructions dependencies excuses platelets asymptotes courts dolphins multipliers sauternes warthogs frets dinos attainments somas patterns forges braids frays warhorses dugouts epitaphs pearls tithes waters orbits gifts sheaves depths sentiments decoys realms pains grouches escapades packages requests accounts deposits")
	tpchVerbs    = strings.Fields("sleep wake are cajole haggle nag use boost affix detect integrate maintain nod was lose sublate solve thrash promise engage hinder print x-ray breach eat grow impress mold poach serve run dazzle snooze doze unwind kindle play hang believe doubt")
	tpchAdj      = strings.Fields("furious sly careful blithe quick fluffy slow quiet ruthless thin close dogged daring brave stealthy permanent enticing idle busy regular final ironic even bold silent pending express special unusual")
	tpchAdv      = strings.Fields("sometimes always never furiously slyly carefully blithely quickly fluffily slowly quietly ruthlessly thinly closely doggedly daringly bravely stealthily permanently enticingly idly busily regularly finally ironically evenly boldly silently")
	tpchPrep     = strings.Fields("about above across after against along among around at atop before behind beneath beside besides between beyond by despite during except for from inside into near of on outside over past since through throughout to toward under until up upon without with within")
)

// tpchEpochDay is 1992-01-01 in days since 1970-01-01; tpchCurrent is
// 1995-06-17 (the specification's CURRENTDATE).
const (
	tpchEpochDay = 8035
	tpchCurrent  = 9298
	tpchOrderMax = 10440 - 151 // 1998-12-31 minus 151 days
)

func tpchComment(rng *rand.Rand, b []byte) []byte {
	n := 10 + rng.IntN(34)
	start := len(b)
	pick := func(ws []string) string { return strings.ReplaceAll(ws[rng.IntN(len(ws))], "_", " ") }
	for len(b)-start < n {
		// sentence: adjective noun verb adverb preposition the noun.
		for _, w := range []string{pick(tpchAdv), pick(tpchAdj), pick(tpchNouns), pick(tpchVerbs), pick(tpchPrep), "the", pick(tpchAdj), pick(tpchNouns)} {
			if len(b) > start {
				b = append(b, ' ')
			}
			b = append(b, w...)
		}
		b = append(b, '.')
	}
	return b[:start+n]
}

// genTPCHRows fills buf with serialized lineitem rows (see tpchFields).
func genTPCHRows(buf []byte, rng *rand.Rand) {
	var row, strs []byte
	pos := 0
	order := rng.Int64N(1 << 20)
	for pos < len(buf) {
		order++
		orderKey := (order/8)*32 + order%8 + 1
		orderDate := tpchEpochDay + rng.Int64N(tpchOrderMax-tpchEpochDay+1)
		lines := 1 + rng.IntN(7)
		for ln := 1; ln <= lines && pos < len(buf); ln++ {
			part := 1 + rng.Int64N(200000)
			supp := (part+int64(rng.IntN(4))*(10000/4+(part-1)/10000))%10000 + 1
			qty := 1 + rng.Int64N(50)
			retail := 90000 + (part/10)%20001 + 100*(part%1000) // cents
			price := qty * retail                               // cents, decimal(15,2)
			disc := rng.Int64N(11)                              // hundredths
			tax := rng.Int64N(9)
			ship := orderDate + 1 + rng.Int64N(121)
			commit := orderDate + 30 + rng.Int64N(61)
			receipt := ship + 1 + rng.Int64N(30)
			flag := "N"
			if receipt <= tpchCurrent {
				flag = []string{"R", "A"}[rng.IntN(2)]
			}
			status := "O"
			if ship <= tpchCurrent {
				status = "F"
			}
			strs = strs[:0]
			fixed := []int64{orderKey, part, supp, int64(ln), qty * 100, price, disc, tax}
			texts := []string{flag, status}
			dates := []int64{ship, commit, receipt}
			texts2 := []string{tpchInstruct[rng.IntN(len(tpchInstruct))], tpchMode[rng.IntN(len(tpchMode))]}
			comment := string(tpchComment(rng, nil))
			// Layout: null word, 16 slots, variable region.
			head := 8 + 8*tpchFields
			row = row[:0]
			row = append(row, make([]byte, head)...)
			slot := 0
			put := func(v uint64) {
				binary.LittleEndian.PutUint64(row[8+8*slot:], v)
				slot++
			}
			putStr := func(s string) {
				off := head + len(strs)
				put(uint64(off)<<32 | uint64(len(s)))
				strs = append(strs, s...)
				for len(strs)%8 != 0 {
					strs = append(strs, 0)
				}
			}
			for _, v := range fixed {
				put(uint64(v))
			}
			for _, s := range texts {
				putStr(s)
			}
			for _, d := range dates {
				put(uint64(d))
			}
			for _, s := range texts2 {
				putStr(s)
			}
			putStr(comment)
			row = append(row, strs...)
			var l [4]byte
			binary.BigEndian.PutUint32(l[:], uint32(len(row)))
			pos += copy(buf[pos:], l[:])
			pos += copy(buf[pos:], row)
		}
	}
}
