package model

import "testing"

// TestArchTensors_Counts checks that the tensor lists computed from the
// architectures sum to torchvision's published parameter counts and are
// contiguous, and that each tensor's size is the product of its shape.
func TestArchTensors_Counts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tensors []Tensor
		params  int
		n       int
	}{
		{"resnet50", ResNet50Tensors(), ResNet50Params, 161},
		{"vgg16", VGG16Tensors(), VGG16Params, 32},
	} {
		off := 0
		for _, x := range tc.tensors {
			if x.Offset != off {
				t.Fatalf("%s: %s at offset %d, want %d", tc.name, x.Name, x.Offset, off)
			}
			p := 1
			for _, d := range x.Shape {
				p *= d
			}
			if p != x.Size {
				t.Fatalf("%s: %s size %d, shape %v", tc.name, x.Name, x.Size, x.Shape)
			}
			off += x.Size
		}
		if off != tc.params {
			t.Errorf("%s: %d parameters, published %d", tc.name, off, tc.params)
		}
		if len(tc.tensors) != tc.n {
			t.Errorf("%s: %d tensors, want %d", tc.name, len(tc.tensors), tc.n)
		}
	}
}
