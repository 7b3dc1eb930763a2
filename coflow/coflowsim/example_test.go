package coflowsim_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/falconml/falcon/coflow"
	"github.com/falconml/falcon/coflow/coflowsim"
)

// Three coflows on a 4-port fabric. SEBF serves coflow 1 (4 MiB through
// port 3) before coflow 2 (8 MiB through port 3): 32 ms, then 64 ms more.
// Coflow 3 arrives at 12,000 ms and is admitted with the epoch starting at
// 10,240 ms; its mapper sends 2 MiB, which takes 16 ms.
func Example() {
	const trace = `4 3
1 0 2 0 1 1 3:4.0
2 500 1 2 1 3:8.0
3 12000 1 0 2 1:1.0 2:1.0
`
	tr, err := coflow.ReadTrace(strings.NewReader(trace))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := coflowsim.Run(tr, "SEBF", coflowsim.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := coflowsim.WriteReference(os.Stdout, res); err != nil {
		fmt.Println(err)
	}
	// Output:
	// JOB-1 0.0 32.0 2 1 4194304.0 4194304.0 32.0 54 32.0
	// JOB-2 0.0 96.0 1 1 8388608.0 8388608.0 96.0 106 96.0
	// JOB-3 10240.0 10256.0 1 2 2097152.0 1048576.0 16.0 17 32.0
	// 144.0
}
