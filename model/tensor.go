package model

// Tensor is one named parameter tensor of a model: the elements
// params[Offset : Offset+Size] of the flat parameter vector, holding a
// row-major array of shape Shape (the product of Shape is Size). A
// parameter server that shards or transfers a model by key gives each
// tensor one key, as TensorFlow or PyTorch do for every weight matrix and
// bias vector; a cost model reads the sizes from here.
type Tensor struct {
	Name   string
	Offset int
	Size   int
	Shape  []int
}

// Layered is implemented by models that know their parameter tensors.
// The tensors are in parameter order, contiguous and cover the whole
// vector: Tensors()[0].Offset == 0, each next Offset is the previous
// Offset+Size, and the last ends at NumParams.
type Layered interface {
	Tensors() []Tensor
}

var (
	_ Layered = (*Softmax)(nil)
	_ Layered = (*MLP)(nil)
	_ Layered = (*CNN)(nil)
)

// Tensors returns m's parameter tensors if m implements [Layered], and
// otherwise one tensor "params" of shape [NumParams] covering the vector.
func Tensors(m Model) []Tensor {
	if l, ok := m.(Layered); ok {
		return l.Tensors()
	}
	n := m.NumParams()
	return []Tensor{{Name: "params", Size: n, Shape: []int{n}}}
}

// tensorList builds contiguous tensors from (name, shape) pairs.
type tensorList []Tensor

func (l tensorList) add(name string, shape ...int) tensorList {
	size := 1
	for _, s := range shape {
		size *= s
	}
	off := 0
	if n := len(l); n > 0 {
		off = l[n-1].Offset + l[n-1].Size
	}
	return append(l, Tensor{Name: name, Offset: off, Size: size, Shape: shape})
}

// Tensors implements [Layered]: "w" (Classes×Dim) and "b" (Classes).
func (m *Softmax) Tensors() []Tensor {
	return tensorList(nil).add("w", m.Classes, m.Dim).add("b", m.Classes)
}

// Tensors implements [Layered]: "fc1.w" (Hidden×Dim), "fc1.b", "fc2.w"
// (Classes×Hidden), "fc2.b".
func (m *MLP) Tensors() []Tensor {
	return tensorList(nil).add("fc1.w", m.Hidden, m.Dim).add("fc1.b", m.Hidden).
		add("fc2.w", m.Classes, m.Hidden).add("fc2.b", m.Classes)
}
