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

// TestReferenceTraces replays small traces under FIFO, LCF and PFP and compares with the
// lines the reference simulator printed for them (see RESEARCH.md, first
// section: the traces are shrunk from random ones on which the two
// disagreed, or built to probe one rule). The fourth session's rules fail
// the arrival-order and reducer-count cases, the rules without the
// backfill threshold the others, and the sixth session's the LCF case
// (one subtraction per flow) and the truncated-deadline case.
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
	for _, c := range pfpCases {
		t.Run("PFP/"+c.name, func(t *testing.T) { check(t, "PFP", c.trace, c.want) })
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
