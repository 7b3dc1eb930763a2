package coflowsim

import (
	"slices"
	"strings"
	"testing"

	"github.com/falconml/falcon/coflow"
)

// lineOrderTrace is a trace shrunk from a random one (14 coflows, 14 ports).
const lineOrderTrace = "14 14\n1 0 1 9 3 6:2.0 1:7.0 5:40.0\n2 0 3 3 11 8 3 0:19.0 1:143.0 2:13.0\n3 0 2 10 8 2 10:1.0 6:3.0\n4 0 1 2 1 5:118.0\n5 0 1 8 2 6:2.0 13:48.0\n6 0 1 3 2 1:3.0 10:1.0\n7 0 5 5 11 3 0 6 7 7:40.0 4:40.0 9:40.0 3:26.0 0:1.0 10:40.0 1:1020.0\n8 0 5 10 7 9 6 12 5 4:1.0 3:287.0 0:40.0 7:7.0 5:99.0\n9 0 2 12 11 1 7:1.0\n10 0 5 1 5 13 3 9 7 0:10.0 7:8.0 1:1.0 6:10.0 9:1026.0 10:40.0 3:40.0\n11 0 4 12 10 8 7 4 3:56.0 12:228.0 7:2416.0 10:100.0\n12 0 2 2 1 1 6:13.0\n13 0 12 11 10 2 0 6 8 9 13 4 3 5 7 7 12:33.0 6:300.0 11:33.0 3:100.0 1:300.0 5:1.0 2:32.0\n14 30196 2 8 11 2 7:1.0 13:1.0\n"

// takeOffTrace is shrunk from a random trace of 58 ports: six coflows,
// the first of 24 mappers and 26 reducers.
const takeOffTrace = "58 6\n1 0 24 32 1 45 27 37 13 34 23 10 22 18 11 36 38 42 3 17 54 51 57 31 5 29 30 26 29:3089.0 16:100.0 3:272.0 5:1.0 44:148.0 30:910.0 20:100.0 40:968.0 13:435.0 22:100.0 31:1.0 7:869.0 0:100.0 24:161.0 9:1.0 51:99.0 37:100.0 33:262.0 54:1.0 19:100.0 35:1.0 42:180.0 25:268.0 32:100.0 43:100.0 47:242.0\n2 0 40 30 17 42 9 43 29 53 7 50 8 15 3 49 24 39 27 40 55 33 52 44 46 48 45 6 4 28 47 56 16 51 54 36 14 12 19 13 11 10 25 14 1:1.0 57:129.0 23:472.0 14:1.0 41:245.0 19:44.0 53:219.0 26:53.0 50:1.0 42:803.0 5:55.0 54:150.0 28:488.0 44:394.0\n3 0 1 4 3 46:27.0 39:55.0 38:33.0\n4 0 3 13 14 31 2 9:40.0 6:1.0\n5 0 3 11 26 27 3 31:16.0 49:5.0 10:5.0\n6 15899 7 12 29 0 45 41 56 20 10 29:73.0 27:23.0 54:161.0 31:1523.0 11:56.0 33:108.0 30:442.0 8:58.0 55:471.0 44:10.0\n"

// deadlineTieTrace is shrunk from a random trace of 53 ports; coflows 1
// to 13 only move coflows 17 and 18 to the random draws that give them
// the same printed deadline.
const deadlineTieTrace = "53 18\n1 0 1 3 1 35:1.0\n2 0 1 33 1 7:1.0\n3 0 1 7 1 13:1.0\n4 0 1 8 1 5:1.0\n5 0 1 27 1 34:1.0\n6 0 1 4 1 35:1.0\n7 0 1 10 1 13:1.0\n8 0 1 27 1 36:1.0\n9 0 1 13 1 16:1.0\n10 0 1 22 1 32:1.0\n11 0 1 19 1 13:1.0\n12 0 1 39 1 15:1.0\n13 0 1 8 1 15:1.0\n14 15258 2 19 34 9 1:1861.0 32:172.0 4:491.0 14:40.0 10:617.0 44:709.0 6:279.0 9:97.0 20:100.0\n15 15432 25 34 19 3 0 46 21 45 51 5 29 49 10 24 17 11 33 7 40 18 50 25 30 31 20 37 22 5:105.0 0:18.0 47:831.0 51:94.0 18:323.0 43:540.0 32:1306.0 1:420.0 39:1107.0 35:124.0 15:43.0 8:857.0 36:29.0 19:220.0 37:340.0 46:165.0 10:81.0 52:9.0 6:1431.0 38:795.0 7:73.0 13:256.0\n16 26575 1 22 3 42:10.0 50:8.0 3:12.0\n17 33046 27 37 38 5 6 31 40 24 48 0 46 14 36 13 8 27 11 25 19 39 28 22 18 7 34 33 41 23 28 40:469.0 9:209.0 30:343.0 34:49.0 39:34.0 43:100.0 16:1205.0 21:1531.0 49:200.0 11:20.0 28:245.0 15:70.0 13:351.0 27:70.0 41:423.0 24:22.0 20:992.0 36:258.0 32:316.0 29:59.0 38:93.0 45:511.0 10:31.0 6:76.0 26:170.0 52:99.0 8:52.0 5:21.0\n18 34768 19 16 41 48 17 36 34 23 27 6 7 1 20 32 0 9 13 5 15 42 14 19:215.0 34:1326.0 36:1128.0 30:315.0 14:43.0 16:82.0 45:155.0 35:116.0 23:257.0 42:77.0 40:29.0 51:1642.0 38:402.0 44:319.0\n"

// capTrace is shrunk from a random subset of synth-b's coflows (SEBF).
// At 52,416 ms coflow 6, one flow, is MADD-served at receiver 25's free
// capacity F; rem·8 / (rem·8 / F) comes out one ulp above F, so sender 5,
// which coflow 23 reaches next, keeps one ulp less. Coflow 23's rates
// (its bottleneck is sender 5) then differ by 2e-14 of themselves, which
// is enough to round 30 of its flows' per-quantum bytes the other way in
// its reducer count at receiver 8, and at 61,440 ms that count leaves
// receiver 8 a residue of 0.00104 bit/s instead of less than 1e-3, so
// coflow 25 is not skipped: its reducer sums end 408 ms off. Capping a
// MADD rate at what its ports had free (maddRate) gives coflow 6 exactly
// F, as coflowsim does.
const capTrace = "60 25\n" +
	"1 0 1 21 1 41:1.0\n" +
	"2 12436 4 58 1 13 51 19 55:5.0 4:1.0 27:153.0 51:143.0 2:1.0 11:5.0 34:5571.0 21:1.0 43:300.0 50:1.0 8:1.0 30:1.0 33:1.0 46:1.0 56:5.0 28:5.0 31:5.0 37:5.0 5:1.0\n" +
	"3 13032 2 49 1 2 2:1.0 22:5.0\n" +
	"4 34292 3 54 5 43 3 41:517.0 29:124.0 14:103.0\n" +
	"5 34820 4 33 37 13 31 11 23:5286.0 53:743.0 9:1.0 32:6.0 25:632.0 6:2.0 47:34.0 50:2.0 5:4.0 0:2.0 10:5.0\n" +
	"6 37157 1 5 1 25:2557.0\n" +
	"7 37462 14 48 31 3 25 39 5 35 8 21 40 45 1 55 43 6 48:117.0 13:2.0 37:2.0 34:3.0 0:8.0 52:40.0\n" +
	"8 37933 7 42 53 35 45 7 44 55 12 25:7.0 19:194.0 41:109.0 35:8.0 7:3.0 13:92.0 6:6.0 26:176.0 20:7.0 34:8.0 8:3.0 17:5.0\n" +
	"9 42908 2 38 33 13 36:182.0 16:4.0 59:2.0 56:138.0 1:4.0 11:3.0 19:6.0 14:2.0 4:876.0 53:69.0 32:4.0 21:5.0 47:199.0\n" +
	"10 42965 20 24 4 27 10 9 58 13 56 31 14 20 21 8 47 55 49 2 12 15 46 1 44:195.0\n" +
	"11 44700 16 59 17 9 55 4 11 46 22 43 3 7 19 20 54 37 49 1 17:8.0\n" +
	"12 46662 4 22 38 54 31 19 29:265.0 2:1346.0 12:6.0 9:5.0 30:173.0 43:186.0 1:6.0 28:3.0 48:1391.0 37:8.0 25:8.0 34:3.0 3:5.0 18:195.0 10:7.0 58:6.0 11:2.0 49:10.0 13:2.0\n" +
	"13 47212 52 42 31 25 17 58 36 40 54 29 3 5 20 55 53 30 50 41 9 1 56 34 28 44 49 46 37 15 57 2 8 6 38 48 16 39 13 11 35 43 47 33 19 4 59 10 24 18 45 12 52 32 26 5 44:6435.0 53:55.0 28:8.0 51:4.0 19:1.0\n" +
	"14 49714 20 59 41 55 4 42 10 7 16 18 24 19 52 11 39 44 48 46 58 8 3 17 27:3.0 55:4.0 26:2.0 49:142.0 25:8.0 50:3.0 48:5.0 0:36.0 36:1.0 16:2220.0 31:8.0 40:2.0 56:1230.0 14:73.0 24:6.0 22:6.0 2:6.0\n" +
	"15 49757 4 50 30 58 5 2 7:7.0 27:152.0\n" +
	"16 51080 51 37 34 26 33 5 12 11 49 3 39 9 52 35 17 59 20 45 41 2 50 29 51 27 6 30 53 16 44 42 40 56 8 14 22 19 57 4 13 15 18 7 55 24 21 28 1 47 48 38 31 23 36 36:62.0 30:6.0 25:1.0 1:5.0 24:32.0 4:8.0 47:150.0 57:7.0 46:139.0 29:2487.0 39:199.0 6:4.0 13:163.0 15:181.0 31:4.0 37:67.0 20:31.0 40:6.0 7:110.0 21:7.0 19:7.0 56:7.0 14:7.0 32:4.0 26:121.0 52:1.0 12:176.0 16:6.0 2:158.0 34:5.0 45:153.0 22:3.0 8:365.0 44:448.0 48:8.0 11:8.0\n" +
	"17 51951 4 38 3 29 33 8 35:1.0 28:3.0 36:65.0 1:5.0 18:1.0 22:7.0 27:48.0 48:170.0\n" +
	"18 54433 48 52 11 37 43 48 10 30 22 38 45 59 13 20 14 53 23 3 46 31 56 4 34 57 1 6 47 2 49 41 19 17 27 12 33 25 40 55 0 50 5 29 8 36 39 54 32 7 28 10 18:1.0 14:5.0 35:3.0 1:2.0 22:2.0 15:4.0 23:8.0 0:138.0 54:7.0 59:5.0\n" +
	"19 55880 19 56 37 41 55 53 12 4 7 15 34 21 50 27 32 35 19 2 18 33 2 22:2.0 4:3.0\n" +
	"20 57172 11 48 19 21 11 35 33 6 40 56 16 12 12 52:172.0 50:3.0 46:2018.0 14:1.0 48:182.0 10:5.0 3:3.0 22:1.0 2:5.0 57:4.0 45:26.0 8:4.0\n" +
	"21 57556 27 44 24 45 20 31 0 3 26 55 37 58 7 33 16 53 48 1 23 38 42 35 21 49 9 11 13 32 58 0:2.0 31:8.0 42:1.0 49:6.0 41:585.0 36:661.0 40:51.0 15:6.0 28:157.0 12:5.0 58:2.0 46:174.0 2:7.0 4:762.0 34:40.0 47:185.0 8:5.0 50:5949.0 24:393.0 29:43.0 14:177.0 27:5.0 55:7.0 10:8.0 23:17.0 22:4.0 9:6.0 43:39.0 5:1.0 19:174.0 1:1.0 59:4.0 7:55.0 20:131.0 57:898.0 32:6.0 44:128.0 38:3.0 33:221.0 54:117.0 37:3.0 45:4.0 25:182.0 51:1.0 21:1.0 16:5.0 52:150.0 17:6.0 6:1047.0 35:26.0 18:6.0 53:6.0 39:588.0 11:7.0 26:159.0 30:1.0 56:93.0 13:5.0\n" +
	"22 58357 1 30 3 38:5.0 58:3.0 32:6.0\n" +
	"23 59274 38 51 17 25 43 30 57 56 55 22 5 7 2 44 54 34 50 53 9 28 42 36 27 6 14 40 41 18 19 23 12 45 37 31 0 26 47 15 4 4 8:2764.0 10:6.0 7:1.0 56:1.0\n" +
	"24 59601 1 41 1 21:4.0\n" +
	"25 69103 1 14 3 8:4199.0 13:190.0 2:197.0\n"

// TestReferenceTraces replays small traces under FIFO, LCF, SEBF and PFP and compares with the
// lines the reference simulator printed for them (see RESEARCH.md, first
// section: the traces are shrunk from random ones on which the two
// disagreed, or built to probe one rule). The fourth session's rules fail
// the arrival-order and reducer-count cases, the rules without the
// backfill threshold the others, and the sixth session's the LCF case
// (one subtraction per flow) and the truncated-deadline case, and the
// seventh's the SEBF case (uncapped MADD rates).
func TestReferenceTraces(t *testing.T) {
	cases := []struct{ name, trace, want string }{
		// coflowsim sorts a trace by arrival (ties keep trace order)
		// before it draws the deadlines, admits and prints.
		{"arrival order",
			"5 3\n3 500 1 3 1 2:1.0\n1 500 1 1 1 3:5.0\n2 100 1 2 1 4:9.0\n",
			"JOB-2 0.0 72.0 1 1 9437184.0 9437184.0 72.0 122 72.0\nJOB-3 0.0 8.0 1 1 1048576.0 1048576.0 8.0 13 8.0\nJOB-1 0.0 40.0 1 1 5242880.0 5242880.0 40.0 42 40.0\n120.0\n"},
		{"reducer count: coflow 4 skipped at 8 ms, served at 8000 ms",
			"5 4\n1 0 1 4 1 2:1.0\n2 0 2 2 0 2 0:40.0 3:1000.0\n3 0 4 0 3 4 2 2 4:4.0 0:1000.0\n4 0 1 3 2 2:1000.0 0:1.0\n",
			"JOB-1 0.0 8.0 1 1 1048576.0 1048576.0 8.0 14 8.0\nJOB-2 0.0 8000.0 2 2 1.09051904E9 1.048576E9 8000.0 13261 16000.0\nJOB-3 0.0 8328.0 4 2 1.052770304E9 1.048576E9 8328.0 8461 16336.0\nJOB-4 0.0 10264.0 1 2 1.049624576E9 1.048576E9 10264.0 14204 20528.0\n26600.0\n"},
		{"reducer count: a nearly finished flow takes the backfill",
			"5 4\n1 0 1 4 1 2:1.0\n2 0 2 2 0 2 0:1.0 3:1000.0\n3 0 4 0 3 4 2 2 4:1.0 0:1000.0\n4 0 1 3 2 2:1000.0 0:1.0\n",
			"JOB-1 0.0 8.0 1 1 1048576.0 1048576.0 8.0 14 8.0\nJOB-2 0.0 8000.0 2 2 1.050673152E9 1.048576E9 8000.0 13261 16000.0\nJOB-3 0.0 8024.0 4 2 1.052770304E9 1.048576E9 8024.0 8461 16032.0\nJOB-4 0.0 10040.0 1 2 1.049624576E9 1.048576E9 10040.0 14204 20080.0\n26072.0\n"},
		{"reducer count: six coflows at five ports",
			"5 6\n1 0 1 2 1 4:300.0\n2 0 1 3 1 1:10.0\n3 0 2 0 1 4 2:40.0 3:100.0 0:1000.0 4:1.0\n4 0 1 1 1 3:40.0\n5 0 4 4 1 3 0 3 0:1.0 4:1.0 3:1000.0\n6 0 1 4 3 3:40.0 2:1000.0 4:1.0\n",
			"JOB-1 0.0 2400.0 1 1 3.145728E8 3.145728E8 2400.0 4060 2400.0\nJOB-2 0.0 80.0 1 1 1.048576E7 1.048576E7 80.0 133 80.0\nJOB-3 0.0 8872.0 2 4 1.197473792E9 1.048576E9 8872.0 8461 27736.0\nJOB-4 0.0 320.0 1 1 4.194304E7 4.194304E7 320.0 568 320.0\nJOB-5 0.0 9424.0 4 3 1.056964608E9 1.048576E9 9424.0 8159 18656.0\nJOB-6 0.0 13688.0 1 3 1.091567616E9 1.048576E9 13688.0 10083 29800.0\n34784.0\n"},
		{"backfill threshold: four coflows",
			"5 4\n1 11389 2 0 1 3 4:1.0 1:100.0 3:1.0\n2 17104 4 0 1 2 3 3 0:100.0 4:1000.0 2:1000.0\n3 17104 5 3 2 1 0 4 1 2:300.0\n4 26549 1 0 3 1:1.0 4:1.0 2:1.0\n",
			"JOB-1 10240.0 11040.0 2 3 1.09051904E8 1.048576E8 800.0 1353 2400.0\nJOB-2 10240.0 18312.0 4 3 2.2020096E9 1.048576E9 8072.0 13261 17312.0\nJOB-3 10240.0 20648.0 5 1 3.145728E8 3.145728E8 10408.0 2538 10408.0\nJOB-4 20480.0 20656.0 1 3 3145728.0 1048576.0 176.0 43 224.0\n19456.0\n"},
		{"backfill threshold: five coflows at eleven ports",
			"11 5\n1 0 3 1 5 0 1 10:300.0\n2 0 2 1 6 2 8:1.0 0:300.0\n3 0 2 8 6 1 5:1000.0\n4 0 6 4 2 6 9 10 0 1 6:1000.0\n5 0 2 1 6 4 6:1.0 5:1.0 1:300.0 2:1.0\n",
			"JOB-1 0.0 2400.0 3 1 3.145728E8 3.145728E8 2400.0 4060 2400.0\nJOB-2 0.0 2400.0 2 2 3.16669952E8 3.145728E8 2400.0 3978 4800.0\nJOB-3 0.0 8016.0 2 1 1.048576E9 1.048576E9 8016.0 8461 8016.0\nJOB-4 0.0 8120.0 6 1 1.050673152E9 1.050673152E9 8120.0 14218 8120.0\nJOB-5 0.0 8544.0 2 4 3.20864256E8 3.145728E8 8544.0 2448 27592.0\n29480.0\n"},
		{"reducer count: 80 s of drift serve a coflow admitted late",
			"10 3\n1 0 1 0 1 9:13.0\n2 0 3 0 1 2 1 5:32000.0\n3 92060 1 8 3 5:1.0 6:1.0 7:1.0\n",
			"JOB-1 0.0 104.0 1 1 1.3631488E7 1.3631488E7 104.0 176 104.0\nJOB-2 0.0 256016.0 3 1 3.3555480576E10 3.3555480576E10 256016.0 424356 256016.0\nJOB-3 81920.0 256032.0 1 3 3145728.0 1048576.0 174112.0 25 348232.0\n430232.0\n"},
		// Coflow 2's reducer count ends 0.014 bytes below its flows' sum:
		// it drops to zeroBytes one quantum before the flows do (one has
		// 0.0011 bytes left), and the reducer, hence the coflow, is done.
		{"reducer count: the count, not the flows, ends a reducer",
			"10 3\n1 0 1 0 1 9:37.0\n2 0 3 0 1 2 1 5:32000.0\n3 92060 1 8 1 7:1.0\n",
			"JOB-1 0.0 296.0 1 1 3.8797312E7 3.8797312E7 296.0 501 296.0\nJOB-2 0.0 256008.0 3 1 3.3555480576E10 3.3555480576E10 256008.0 424356 256008.0\nJOB-3 81920.0 81928.0 1 1 1048576.0 1048576.0 8.0 8 8.0\n256312.0\n"},
		// Mapper port 1 is listed twice and reducer port 4 twice: one
		// mapper, one reducer of 3 MB (rounded to 4 MiB over two mappers).
		{"repeated ports",
			"5 2\n1 0 3 1 2 1 3 4:1.0 3:5.0 4:2.0\n2 0 2 0 0 1 4:2.0\n",
			"JOB-1 0.0 48.0 2 2 1.048576E7 6291456.0 48.0 81 96.0\nJOB-2 0.0 48.0 1 1 2097152.0 2097152.0 48.0 27 48.0\n96.0\n"},
		// Coflow 14 is admitted at 20,480 ms next to coflow 11's last
		// bytes into receiver 7, and is skipped only if the residue coflow
		// 11 leaves there is 1e-3 bit/s or less: its reducer count must
		// take its flows in sender port order (7, 8, 10, 12), not the
		// trace's (12, 10, 8, 7).
		{"reducer count in sender port order",
			lineOrderTrace,
			"JOB-1 0.0 392.0 1 3 5.1380224E7 4.194304E7 392.0 663 1176.0\nJOB-2 0.0 1208.0 3 3 1.8874368E8 1.50994944E8 1208.0 1910 3472.0\nJOB-3 0.0 40.0 2 2 6291456.0 4194304.0 40.0 34 80.0\nJOB-4 0.0 1264.0 1 1 1.23731968E8 1.23731968E8 1264.0 1674 1264.0\nJOB-5 0.0 696.0 1 2 5.24288E7 5.0331648E7 696.0 408 1392.0\nJOB-6 0.0 1232.0 1 2 4194304.0 3145728.0 1232.0 39 1408.0\nJOB-7 0.0 9392.0 5 7 1.27401984E9 1.06954752E9 9392.0 13606 42424.0\nJOB-8 0.0 3360.0 5 5 4.6661632E8 3.0408704E8 3360.0 3760 8648.0\nJOB-9 0.0 16.0 2 1 2097152.0 2097152.0 16.0 29 16.0\nJOB-10 0.0 9432.0 5 7 1.20061952E9 1.08003328E9 9432.0 8077 25688.0\nJOB-11 0.0 20488.0 4 4 2.9360128E9 2.533359616E9 20488.0 27211 37488.0\nJOB-12 0.0 160.0 2 1 1.4680064E7 1.4680064E7 160.0 202 160.0\nJOB-13 0.0 11832.0 12 7 8.68220928E8 3.145728E8 11832.0 4535 24320.0\nJOB-14 20480.0 20504.0 2 2 4194304.0 2097152.0 24.0 28 40.0\n59536.0\n"},
		// Coflows 17 and 18 are admitted together with the same printed
		// deadline, 21,323 ms: 21,323.09 and 21,322.91 before rounding.
		// The backfill takes 18 first (by the deadline truncated);
		// keeping their FIFO order on the tie ends 17 a quantum early.
		{"backfill by the truncated deadline",
			deadlineTieTrace,
			"JOB-1 0.0 8.0 1 1 1048576.0 1048576.0 8.0 14 8.0\nJOB-2 0.0 8.0 1 1 1048576.0 1048576.0 8.0 13 8.0\nJOB-3 0.0 8.0 1 1 1048576.0 1048576.0 8.0 8 8.0\nJOB-4 0.0 8.0 1 1 1048576.0 1048576.0 8.0 14 8.0\nJOB-5 0.0 8.0 1 1 1048576.0 1048576.0 8.0 8 8.0\nJOB-6 0.0 16.0 1 1 1048576.0 1048576.0 16.0 10 16.0\nJOB-7 0.0 16.0 1 1 1048576.0 1048576.0 16.0 13 16.0\nJOB-8 0.0 16.0 1 1 1048576.0 1048576.0 16.0 13 16.0\nJOB-9 0.0 8.0 1 1 1048576.0 1048576.0 8.0 15 8.0\nJOB-10 0.0 8.0 1 1 1048576.0 1048576.0 8.0 8 8.0\nJOB-11 0.0 24.0 1 1 1048576.0 1048576.0 24.0 11 24.0\nJOB-12 0.0 8.0 1 1 1048576.0 1048576.0 8.0 14 8.0\nJOB-13 0.0 16.0 1 1 1048576.0 1048576.0 16.0 15 16.0\nJOB-14 10240.0 27728.0 2 9 4.584374272E9 1.952448512E9 17488.0 30306 157392.0\nJOB-15 10240.0 30744.0 25 22 9.8828288E9 1.5204352E9 20504.0 11422 451088.0\nJOB-16 20480.0 20720.0 1 3 3.145728E7 1.2582912E7 240.0 439 720.0\nJOB-17 30720.0 43040.0 27 28 8.719958016E9 1.613758464E9 12320.0 21323 344960.0\nJOB-18 30720.0 43952.0 19 14 6.57457152E9 1.733296128E9 13232.0 21323 185248.0\n63936.0\n"},
	}
	pfpCases := []struct{ name, trace, want string }{
		// Coflow 2's 1000 MiB flow arrives when coflow 1's 2000 MiB flow
		// has 720 MiB left: remaining bytes, not sizes, place it (after).
		{"a newcomer goes by the bytes left",
			"3 2\n1 0 1 0 1 1:2000.0\n2 10241 1 2 1 1:1000.0\n",
			"JOB-1 0.0 16000.0 1 1 2.097152E9 2.097152E9 16000.0 27067 16000.0\nJOB-2 10240.0 24000.0 1 1 1.048576E9 1.048576E9 13760.0 13261 13760.0\n29760.0\n"},
		// Coflow 1's equal flows at a receiver are served one at a time
		// in queue order; re-sorting them by bytes left when coflow 2 is
		// admitted changes which reducer ends when (the last field).
		{"the queue is not re-sorted",
			"21 2\n1 0 6 1 7 14 8 16 15 4 5:308.0 12:1421.0 3:6373.0 17:1.0\n2 17523 1 6 1 13:1.0\n",
			"JOB-1 0.0 51024.0 6 4 8.512339968E9 6.687817728E9 51024.0 86318 82144.0\nJOB-2 10240.0 10248.0 1 1 1048576.0 1048576.0 8.0 13 8.0\n51032.0\n"},
		// At 10,240 ms sender 14's flow to receiver 2 has exactly 1 MiB
		// left and its flow to receiver 6, blocked, 36 MiB: the 1 MiB
		// newcomer at receiver 2 goes after the first, since only flows
		// at its own receiver count.
		{"one queue per receiver",
			"18 2\n1 0 8 1 7 14 13 16 11 10 5 2 6:1291.0 2:1462.0\n2 17985 1 11 1 2:1.0\n",
			"JOB-1 0.0 11720.0 8 2 2.89406976E9 1.535115264E9 11720.0 19813 22256.0\nJOB-2 10240.0 10256.0 1 1 1048576.0 1048576.0 16.0 13 16.0\n11736.0\n"},
	}
	lcfCases := []struct{ name, trace, want string }{
		// At 10,240 ms coflow 1's MADD leaves its bottleneck receiver 29
		// a residue of 1e-3 bit/s or less, and coflow 6 is skipped, only
		// if coflow 1's rates were summed per port before being taken off
		// the free capacities at every earlier allocation: one
		// subtraction per flow leaves other last bits there, hence other
		// rates for the coflows after it, other per-quantum bytes and, by
		// 10,240 ms, a count 5e-4 bytes off (residue 0.00128 bit/s).
		{"rates summed per port before they are taken off",
			takeOffTrace,
			"JOB-1 0.0 24864.0 24 26 9.613344768E9 3.246391296E9 24864.0 41900 168808.0\nJOB-2 0.0 6888.0 40 14 3.60710144E9 8.8080384E8 6888.0 11139 90480.0\nJOB-3 0.0 920.0 1 3 1.2058624E8 5.767168E7 920.0 973 2760.0\nJOB-4 0.0 336.0 3 2 4.718592E7 4.4040192E7 336.0 596 608.0\nJOB-5 0.0 144.0 3 3 3.145728E7 1.8874368E7 144.0 147 432.0\nJOB-6 10240.0 25872.0 7 10 3.104833536E9 1.600126976E9 15632.0 14780 46080.0\n48784.0\n"},
	}
	check := func(t *testing.T, sched, trace, want string) {
		tr, err := coflow.ReadTrace(strings.NewReader(trace))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(tr, sched, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := WriteReference(&b, res); err != nil {
			t.Fatal(err)
		}
		if b.String() != want {
			t.Fatalf("got\n%swant\n%s", b.String(), want)
		}
	}
	for _, c := range cases {
		t.Run("FIFO/"+c.name, func(t *testing.T) { check(t, "FIFO", c.trace, c.want) })
	}
	for _, c := range lcfCases {
		t.Run("LCF/"+c.name, func(t *testing.T) { check(t, "LCF", c.trace, c.want) })
	}
	sebfCases := []struct{ name, trace, want string }{
		{"a MADD rate capped at its ports' free capacity", capTrace, "JOB-1 0.0 8.0 1 1 1048576.0 1048576.0 8.0 14 8.0\nJOB-2 10240.0 56192.0 4 19 6.559891456E9 5.842665472E9 45952.0 73889 617584.0\nJOB-3 10240.0 10288.0 2 2 8388608.0 6291456.0 48.0 51 88.0\nJOB-4 30720.0 35768.0 3 3 7.86432E8 5.44210944E8 5048.0 7364 15144.0\nJOB-5 30720.0 76312.0 4 11 7.063207936E9 5.544869888E9 45592.0 43146 141552.0\nJOB-6 30720.0 53808.0 1 1 2.681208832E9 2.681208832E9 23088.0 24766 23088.0\nJOB-7 30720.0 31728.0 14 6 2.34881024E8 1.32120576E8 1008.0 1681 6048.0\nJOB-8 30720.0 32288.0 7 12 6.89963008E8 2.05520896E8 1568.0 2541 18816.0\nJOB-9 40960.0 47968.0 2 13 1.570766848E9 9.18552576E8 7008.0 12723 91104.0\nJOB-10 40960.0 42560.0 20 1 2.097152E8 2.097152E8 1600.0 1568 1600.0\nJOB-11 40960.0 41088.0 16 1 1.6777216E7 1.6777216E7 128.0 180 128.0\nJOB-12 40960.0 58936.0 4 19 3.83778816E9 1.459617792E9 17976.0 20114 309768.0\nJOB-13 40960.0 100344.0 52 5 7.033847808E9 6.761218048E9 59384.0 97464 112128.0\nJOB-14 40960.0 59624.0 20 17 4.17333248E9 2.32783872E9 18664.0 30777 111464.0\nJOB-15 40960.0 42176.0 4 2 1.6777216E8 1.59383552E8 1216.0 1197 2432.0\nJOB-16 40960.0 64288.0 51 36 6.738149376E9 2.620391424E9 23328.0 36582 538120.0\nJOB-17 51200.0 52728.0 4 8 3.31350016E8 1.80355072E8 1528.0 2383 12224.0\nJOB-18 51200.0 52416.0 48 10 6.03979776E8 1.50994944E8 1216.0 1858 12160.0\nJOB-19 51200.0 51384.0 19 2 3.9845888E7 1.9922944E7 184.0 282 368.0\nJOB-20 51200.0 70264.0 11 12 2.629828608E9 2.122317824E9 19064.0 20945 58848.0\nJOB-21 51200.0 99728.0 27 58 1.5033434112E10 6.256852992E9 48528.0 66539 363744.0\nJOB-22 51200.0 51312.0 1 3 1.4680064E7 6291456.0 112.0 188 336.0\nJOB-23 51200.0 74152.0 38 4 3.028287488E9 2.908749824E9 22952.0 40407 44128.0\nJOB-24 51200.0 51232.0 1 1 4194304.0 4194304.0 32.0 59 32.0\nJOB-25 61440.0 107744.0 1 3 4.808769536E9 4.402970624E9 46304.0 68682 52784.0\n391536.0\n"},
	}
	for _, c := range sebfCases {
		t.Run("SEBF/"+c.name, func(t *testing.T) { check(t, "SEBF", c.trace, c.want) })
	}
	for _, c := range pfpCases {
		t.Run("PFP/"+c.name, func(t *testing.T) { check(t, "PFP", c.trace, c.want) })
	}
	darkCases := []struct{ name, trace, want string }{
		// Coflow 1's 34 flows of 1 MiB move 1/17 MiB each per quantum;
		// when coflow 3 departs at 40 ms it has sent exactly 10 MiB, the
		// first queue's limit. Counted as coflowsim does (job.sent) that
		// is 10 MiB − 3e-8 and it keeps its queue (and receiver 20, ahead
		// of coflow 2); the flows' own per-quantum sums added up in one
		// running sum give 10 MiB + 1.9e-9, and it drops behind coflow 2,
		// finishing at 936 ms instead of 136.
		{"bytes sent: a coflow at exactly 10 MiB keeps its queue",
			"50 3\n1 0 17 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 2 20:17.0 21:17.0\n2 0 1 30 1 20:100.0\n3 0 1 40 1 41:5.0\n",
			"JOB-1 0.0 136.0 17 2 3.5651584E7 1.7825792E7 136.0 133 272.0\nJOB-2 0.0 936.0 1 1 1.048576E8 1.048576E8 936.0 781 936.0\nJOB-3 0.0 40.0 1 1 5242880.0 5242880.0 40.0 39 40.0\n1112.0\n"},
		// Shrunk from a generated trace of 100 ports and 300 coflows.
		// Coflow 168 (70 mappers, one reducer) has sent exactly 10 MiB
		// at 266,320 ms, when coflow 163 departs: 10 MiB − 3.5e-8 in
		// coflowsim's count, and it stays ahead of coflows 162 and 164
		// in the first queue; the flows' per-quantum sums added up per
		// reducer give 10 MiB + 1.9e-9 and it ends 640 ms late.
		{"bytes sent: one count per coflow, quantum by quantum",
			"100 6\n162 269639 12 72 54 82 59 5 22 56 4 58 95 36 0 3 62:32.0 3:83.0 80:68.0\n163 271641 1 58 3 54:2.0 29:4.0 71:1.0\n164 271803 4 17 51 97 89 5 53:34.0 67:77.0 70:30.0 15:844.0 31:1424.0\n165 272353 3 57 78 19 1 85:3.0\n167 273726 1 98 2 54:2.0 52:1.0\n168 275232 70 13 18 61 37 43 79 21 63 52 86 69 22 75 70 4 68 10 33 71 66 51 85 5 0 40 64 36 82 8 24 46 25 81 49 3 55 92 32 73 83 39 7 19 48 15 6 35 27 12 99 91 80 98 41 9 88 2 1 42 89 30 20 23 97 53 57 77 16 17 29 1 87:70402.0\n",
			"JOB-162 266240.0 266960.0 12 3 2.01326592E8 8.8080384E7 720.0 656 1680.0\nJOB-163 266240.0 266320.0 1 3 7340032.0 4194304.0 80.0 55 160.0\nJOB-164 266240.0 277784.0 4 5 2.533359616E9 1.493172224E9 11544.0 11125 19936.0\nJOB-165 266240.0 266264.0 3 1 3145728.0 3145728.0 24.0 23 24.0\nJOB-167 266240.0 266272.0 1 2 3145728.0 2097152.0 32.0 23 48.0\nJOB-168 266240.0 829624.0 70 1 7.384072192E10 7.384072192E10 563384.0 550156 563384.0\n575784.0\n"},
		// Shrunk from another generated trace of 100 ports and 300
		// coflows (the one that matched 276 of 300 lines). Coflow 68's
		// rates are set by what coflows 64 to 66 leave its receivers 70
		// and 72, and by 133,336 ms it has sent 10 MiB up to the last
		// bits of its count. With each coflow's rates summed per port
		// before they are taken off every line is the reference's; with
		// one subtraction per flow the free capacities, hence coflow 68's
		// rates and count, differ in their last bits, the queues come
		// out otherwise and coflow 64 ends 8 ms late.
		{"rates summed per port before they are taken off",
			"100 4\n64 135950 17 26 56 10 86 2 77 38 37 11 46 55 69 40 43 16 75 78 70 18:516.0 92:228.0 73:1082.0 4:5075.0 76:10446.0 26:9852.0 55:341.0 17:3752.0 50:1296.0 68:780.0 58:24732.0 98:1183.0 7:11487.0 65:2791.0 11:93.0 91:1480.0 34:1218.0 5:97.0 33:188.0 70:1692.0 22:6616.0 96:135.0 23:2834.0 52:1004.0 59:12445.0 31:5378.0 71:114.0 60:374.0 72:7707.0 61:958.0 37:1617.0 46:4200.0 16:142.0 40:2045.0 8:30529.0 49:441.0 1:6844.0 10:13303.0 6:134.0 35:33865.0 51:21224.0 89:8403.0 47:15375.0 79:196.0 36:218.0 75:155.0 74:606.0 39:351.0 9:888.0 14:23620.0 64:23940.0 21:798.0 45:256.0 63:235.0 2:11924.0 43:14436.0 88:27599.0 29:7778.0 44:754.0 20:23301.0 41:1957.0 38:6387.0 97:13048.0 86:239.0 57:606.0 90:4779.0 93:4718.0 95:108.0 25:457.0 99:3754.0\n65 138944 4 35 91 41 64 2 79:7.0 33:19.0\n66 140102 66 9 15 13 14 96 45 61 0 93 82 63 20 80 90 12 25 86 84 72 10 11 50 3 21 88 47 73 77 64 38 55 4 97 36 26 6 37 83 34 48 87 62 54 39 17 79 7 18 33 75 99 59 66 76 24 78 56 94 60 68 8 44 52 30 5 40 1 63:237.0\n68 142240 4 75 86 44 81 2 72:9.0 70:6.0\n",
			"JOB-64 133120.0 1249256.0 17 70 4.48532578304E11 3.5526803456E10 1116136.0 264695 1.4096744E7\nJOB-65 133120.0 133336.0 4 2 2.9360128E7 2.097152E7 216.0 156 304.0\nJOB-66 133120.0 135496.0 66 1 2.76824064E8 2.76824064E8 2376.0 2063 2376.0\nJOB-68 133120.0 133384.0 4 2 2.097152E7 1.2582912E7 264.0 94 512.0\n1118992.0\n"},
	}
	for _, c := range darkCases {
		t.Run("DARK/"+c.name, func(t *testing.T) { check(t, "DARK", c.trace, c.want) })
	}
}

// TestLineOrderDoesNotMatter replays the "reducer count in sender port
// order" trace with coflow 11's mappers in all 24 orders and its reducers
// reversed: coflowsim's output does not depend on the order a line lists
// its ports in (checked on the reference for every order), and under the
// trace's own order the replay had a reducer end one quantum late for 5
// of them.
func TestLineOrderDoesNotMatter(t *testing.T) {
	const base = "11 0 4 12 10 8 7 4 3:56.0 12:228.0 7:2416.0 10:100.0\n"
	ref, err := Run(mustTrace(t, lineOrderTrace), "FIFO", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var perm func(done, rest []string)
	var perms [][]string
	perm = func(done, rest []string) {
		if len(rest) == 0 {
			perms = append(perms, slices.Clone(done))
			return
		}
		for i := range rest {
			perm(append(done, rest[i]), append(slices.Clone(rest[:i]), rest[i+1:]...))
		}
	}
	perm(nil, []string{"12", "10", "8", "7"})
	for _, p := range perms {
		line := "11 0 4 " + strings.Join(p, " ") + " 4 10:100.0 7:2416.0 12:228.0 3:56.0\n"
		res, err := Run(mustTrace(t, strings.Replace(lineOrderTrace, base, line, 1)), "FIFO", DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Records, ref.Records) {
			t.Errorf("mappers %v: records differ from the trace's own order", p)
		}
	}
}
