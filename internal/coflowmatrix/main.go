// Command coflowmatrix runs the coflow baseline matrix of issue 20 on the
// FB2010 trace: schedulers × compression × rescheduling × fabric settings
// × seeds, under the protocol in protocol.go.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("protocol: trace %s, mix %s, seeds %v, settings %v, machines/port %d, background %.2f\n",
		TraceFile, Mix, Seeds, Settings, MachinesPerPort, BackgroundFraction)
	fmt.Printf("schedulers %v × compression %v (+ fvdf), rescheduling %v\n", Schedulers, Compression, Rescheduling)
	j := Jobs(1)
	fmt.Printf("jobs: stages %v, next bytes %.2f, disk %.0f B/s\n", j.StageWeights, j.NextBytes, j.DiskBps)
	os.Exit(0)
}
