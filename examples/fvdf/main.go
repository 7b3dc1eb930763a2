// Command fvdf replays coflow traces under FVDF and SEBF and calibrates
// codec profiles.
//
//	go run ./examples/fvdf -calibrate   # print codec profiles of this machine as Go source
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/falconml/falcon/fvdf/codecprof"
)

func main() {
	calibrate := flag.Bool("calibrate", false, "measure lz4/snappy on this machine and print the profiles as Go source")
	flag.Parse()
	if *calibrate {
		ps, err := codecprof.Calibrate(context.Background(), codecprof.DefaultCalibrateConfig())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, p := range ps.Entries {
			fmt.Fprintln(os.Stderr, p)
		}
		fmt.Print(codecprof.GoSource(ps))
		return
	}
}
