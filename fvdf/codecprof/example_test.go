package codecprof_test

import (
	"fmt"

	"github.com/falconml/falcon/fvdf/codecprof"
	"github.com/falconml/falcon/transport"
)

func ExampleProfiles_ForMix() {
	ps := codecprof.Defaults()
	p, err := ps.ForMix(transport.CodecLZ4, codecprof.Mix{codecprof.Text: 1, codecprof.Random: 1})
	if err != nil {
		panic(err)
	}
	fmt.Printf("effective ratio %.2f\n", p.Ratio)
	// Output: effective ratio 0.68
}
