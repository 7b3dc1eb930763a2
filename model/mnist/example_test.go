package mnist_test

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/falconml/falcon/model/mnist"
)

// ExampleReadLabels decodes a tiny IDX1 label file built in memory: the
// magic number 0x00000801, the count, then one byte per label.
func ExampleReadLabels() {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, []uint32{0x00000801, 3})
	b.Write([]byte{7, 2, 1})
	labels, err := mnist.ReadLabels(&b)
	fmt.Println(labels, err)

	_, err = mnist.ReadLabels(bytes.NewReader([]byte{0, 0, 8, 3, 0, 0, 0, 0}))
	fmt.Println(err)
	// Output:
	// [7 2 1] <nil>
	// mnist: bad IDX magic number: got 0x00000803, want 0x00000801
}
