package model

import "fmt"

// This file holds the parameter tensors of two ImageNet networks that
// Falcon does not train but whose communication a cost model charges
// (ps/sim's CostModel): the lists drive the bytes and the number of keys
// of a simulated push and pull while the gradient math stays the trained
// model's. They live here, beside [Tensor] and the trained models' own
// lists, because a tensor list is a property of an architecture, not of a
// simulator: a parameter-server layout or a live cost model reads the
// same lists.
//
// The shapes are computed from the architectures as torchvision builds
// them (torchvision.models.resnet50 and vgg16, the IMAGENET1K_V1 weights),
// not copied from a table: PyTorch's layouts (conv weight out×in×kh×kw,
// linear weight out×in), batch-norm scale and shift as two tensors each
// (their running statistics are buffers, not parameters, and are not
// pushed). Their sums are torchvision's published parameter counts,
// 25,557,032 and 138,357,544 (the "Params" column of torchvision's model
// table, pytorch.org/vision/stable/models.html; TestArchTensors_Counts).

// Published parameter counts of the architectures below (torchvision's
// model table: ResNet-50 25.6 M = 25,557,032, VGG-16 138.4 M =
// 138,357,544).
const (
	ResNet50Params = 25_557_032
	VGG16Params    = 138_357_544
)

// Published forward cost per 224×224 image, in multiply-accumulates:
// torchvision's model table lists "GFLOPS" 4.09 for ResNet-50 and 15.47
// for VGG-16, counted (fvcore's convention) as one per fused
// multiply-add, which is the same as He et al. (2016, Table 1: 3.8×10⁹
// "FLOPs" = multiply-adds for ResNet-50, without the final layer and
// batch norm) and Simonyan & Zisserman (2015: 15.5 G for VGG-16 at the
// same size). One multiply-accumulate is two floating-point operations.
const (
	ResNet50ForwardMACs = 4.09e9
	VGG16ForwardMACs    = 15.47e9
)

// ResNet50Tensors returns the 161 parameter tensors of ResNet-50 (He et
// al. 2016; torchvision's resnet50: bottleneck blocks [3, 4, 6, 3] of
// widths 64, 128, 256, 512 with expansion 4, the stride on the 3×3
// convolution, a 1×1 projection with batch norm on the first block of
// every stage, convolutions without bias, a 1000-way classifier with
// bias), in parameter order.
func ResNet50Tensors() []Tensor {
	var l tensorList
	bn := func(name string, c int) {
		l = l.add(name+".weight", c).add(name+".bias", c)
	}
	l = l.add("conv1.weight", 64, 3, 7, 7)
	bn("bn1", 64)
	in := 64
	for s, blocks := range []int{3, 4, 6, 3} {
		width := 64 << s
		out := 4 * width
		for b := range blocks {
			p := fmt.Sprintf("layer%d.%d.", s+1, b)
			l = l.add(p+"conv1.weight", width, in, 1, 1)
			bn(p+"bn1", width)
			l = l.add(p+"conv2.weight", width, width, 3, 3)
			bn(p+"bn2", width)
			l = l.add(p+"conv3.weight", out, width, 1, 1)
			bn(p+"bn3", out)
			if b == 0 {
				l = l.add(p+"downsample.0.weight", out, in, 1, 1)
				bn(p+"downsample.1", out)
			}
			in = out
		}
	}
	l = l.add("fc.weight", 1000, in).add("fc.bias", 1000)
	return l
}

// VGG16Tensors returns the 32 parameter tensors of VGG-16 (Simonyan &
// Zisserman 2015, configuration D; torchvision's vgg16 without batch
// norm: thirteen 3×3 convolutions with bias of widths 64, 64, 128, 128,
// 256×3, 512×3, 512×3 and three dense layers 25088→4096→4096→1000 with
// bias), in parameter order.
func VGG16Tensors() []Tensor {
	var l tensorList
	in, i := 3, 0
	for _, c := range []int{64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0} {
		if c == 0 { // max pooling: no parameters, but it has a place in features
			i++
			continue
		}
		l = l.add(fmt.Sprintf("features.%d.weight", i), c, in, 3, 3).add(fmt.Sprintf("features.%d.bias", i), c)
		in = c
		i += 2 // the convolution and its ReLU
	}
	fc := func(i, out, in int) {
		l = l.add(fmt.Sprintf("classifier.%d.weight", i), out, in).add(fmt.Sprintf("classifier.%d.bias", i), out)
	}
	fc(0, 4096, 512*7*7)
	fc(3, 4096, 4096)
	fc(6, 1000, 4096)
	return l
}
