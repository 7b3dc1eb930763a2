package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"gonum.org/v1/gonum/blas"
	blasimpl "gonum.org/v1/gonum/blas/gonum"
)

// cnnKernel is the side of both convolutions' square kernels, and
// cnnPool the side and stride of both max-pooling windows.
const (
	cnnKernel = 5
	cnnPool   = 2
)

// CNNConfig configures [NewCNN]. The zero value is LeNet-5 on MNIST.
type CNNConfig struct {
	// Height and Width of the input image; zero means 28 × 28 (MNIST).
	// A dataset row is the image channel-major: Channels × Height × Width.
	Height, Width int
	// Channels of the input image; zero means 1.
	Channels int
	// Classes is the number of output classes; zero means 10.
	Classes int
	// Conv1 and Conv2 are the numbers of 5×5 filters of the first and the
	// second convolution; zero means 6 and 16 (LeNet-5's C1 and C3).
	Conv1, Conv2 int
	// Pad is the zero padding added on each side of the input of the first
	// convolution. Zero means 2, which makes MNIST's 28×28 digits the
	// 32×32 input of LeNet-5; negative means none.
	Pad int
	// Hidden are the widths of the ReLU dense layers between the second
	// pooling layer and the output layer; nil or empty means [120, 84]
	// (LeNet-5's C5 and F6, with C5 as a dense layer, as it is on a 5×5
	// input).
	Hidden []int
}

// DefaultCNNConfig returns LeNet-5 for MNIST: 1×28×28 input padded to
// 32×32, conv 6@5×5 → max-pool 2 → conv 16@5×5 → max-pool 2 → dense 120 →
// dense 84 → dense 10 → softmax; 61,706 parameters.
func DefaultCNNConfig() CNNConfig {
	return CNNConfig{Height: 28, Width: 28, Channels: 1, Classes: 10, Conv1: 6, Conv2: 16, Pad: 2, Hidden: []int{120, 84}}
}

// filled returns c with its zero fields read as their defaults and Hidden
// copied. A negative Pad stays negative (no padding); see padding.
func (c CNNConfig) filled() CNNConfig {
	d := DefaultCNNConfig()
	for _, f := range []struct{ v, d *int }{
		{&c.Height, &d.Height}, {&c.Width, &d.Width}, {&c.Channels, &d.Channels},
		{&c.Classes, &d.Classes}, {&c.Conv1, &d.Conv1}, {&c.Conv2, &d.Conv2}, {&c.Pad, &d.Pad},
	} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	if len(c.Hidden) == 0 {
		c.Hidden = d.Hidden
	}
	c.Hidden = append([]int(nil), c.Hidden...)
	return c
}

// padding returns the padding of the first convolution: Pad, or 0 if
// Pad is negative.
func (c CNNConfig) padding() int { return max(c.Pad, 0) }

// convOut returns the side after a valid 5×5 convolution of a side of n
// (padded by pad on each side) followed by a 2×2 pooling, and whether the
// pooling tiles it exactly.
func convOut(n, pad int) (conv int, ok bool) {
	conv = n + 2*pad - cnnKernel + 1
	return conv, conv > 0 && conv%cnnPool == 0
}

// Validate checks the configuration (after zero fields are read as their
// defaults): positive sizes, Classes in [2, 256], and a geometry where each
// convolution's output is positive and even, so both poolings tile it.
func (c CNNConfig) Validate() error {
	if c.Height < 0 || c.Width < 0 || c.Channels < 0 || c.Classes < 0 || c.Conv1 < 0 || c.Conv2 < 0 {
		return fmt.Errorf("%w: CNN sizes must not be negative: %+v", ErrConfig, c)
	}
	f := c.filled()
	if f.Classes < 2 || f.Classes > 256 {
		return fmt.Errorf("%w: CNN Classes=%d outside [2,256]", ErrConfig, f.Classes)
	}
	for i, h := range f.Hidden {
		if h <= 0 {
			return fmt.Errorf("%w: CNN Hidden[%d]=%d", ErrConfig, i, h)
		}
	}
	for _, side := range []int{f.Height, f.Width} {
		c1, ok := convOut(side, f.padding())
		if !ok {
			return fmt.Errorf("%w: CNN first convolution output %d (side %d, pad %d) is not positive and even", ErrConfig, c1, side, f.padding())
		}
		if c2, ok := convOut(c1/cnnPool, 0); !ok {
			return fmt.Errorf("%w: CNN second convolution output %d (side %d, pad %d) is not positive and even", ErrConfig, c2, side, f.padding())
		}
	}
	return nil
}

// CNN is a LeNet-5-class convolutional network (LeCun, Bottou, Bengio,
// Haffner, "Gradient-based learning applied to document recognition",
// Proc. IEEE 1998) with today's ReLU activations and max pooling in place
// of the original's scaled tanh and trainable sub-sampling:
//
//	x (Channels×H×W) → pad → conv Conv1@5×5 + b → relu → max-pool 2×2
//	  → conv Conv2@5×5 + b → relu → max-pool 2×2 → flatten (F values)
//	  → [dense Hidden[l] + b → relu]… → dense Classes + b = z
//	loss = −log softmax(z)_y
//
// Parameters are one flat vector, tensor by tensor in the order of
// [CNN.Tensors]: conv1.w (Conv1×Channels×5×5), conv1.b, conv2.w
// (Conv2×Conv1×5×5), conv2.b, then fc1.w (Hidden[0]×F), fc1.b, … and the
// output layer's weights and bias; each weight array is row-major with the
// output unit first.
//
// The convolutions are im2col + gemm with gonum's BLAS, in float64 (the
// parameters are converted once per call and the gradient back to float32
// at the end), one sample at a time; each gemm is cut into tiles of at
// most 64×192 outputs, below the size at which gonum's Dgemm spreads a
// product over goroutines, so a call runs on the calling goroutine only,
// the result is the same bit for bit on every run, and after the first
// call LossGrad and Evaluate allocate nothing. Like every [Model], a CNN
// holds scratch buffers: use [CNN.Clone] for each goroutine.
type CNN struct {
	cfg                    CNNConfig // filled
	name                   string
	h1, w1, ph1, pw1       int // first convolution's output, first pooling's output
	h2, w2, ph2, pw2, feat int // the same for the second; feat = Conv2·ph2·pw2
	tensors                []Tensor
	np                     int

	w, g       []float64 // parameters and gradient in float64
	x          []float64 // one input image
	col1, col2 []float64 // im2col: one row per (channel, ky, kx), one column per output position
	dcol2      []float64
	a1, da1    []float64 // first convolution's pre-activations and their gradient
	p1, dp1    []float64
	a2, da2    []float64
	p2, dp2    []float64
	idx1, idx2 []int32     // index into a1/a2 of each pooled maximum
	hs, dhs    [][]float64 // dense outputs (the last are the logits) and their gradients
}

// NewCNN validates cfg and returns the network with its scratch buffers.
func NewCNN(cfg CNNConfig) (*CNN, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.filled()
	m := &CNN{cfg: c}
	m.h1, _ = convOut(c.Height, c.padding())
	m.w1, _ = convOut(c.Width, c.padding())
	m.ph1, m.pw1 = m.h1/cnnPool, m.w1/cnnPool
	m.h2, _ = convOut(m.ph1, 0)
	m.w2, _ = convOut(m.pw1, 0)
	m.ph2, m.pw2 = m.h2/cnnPool, m.w2/cnnPool
	m.feat = c.Conv2 * m.ph2 * m.pw2

	k := cnnKernel
	t := tensorList(nil).add("conv1.w", c.Conv1, c.Channels, k, k).add("conv1.b", c.Conv1).
		add("conv2.w", c.Conv2, c.Conv1, k, k).add("conv2.b", c.Conv2)
	in := m.feat
	var name strings.Builder
	fmt.Fprintf(&name, "cnn(%dx%dx%d,conv%d,conv%d", c.Channels, c.Height, c.Width, c.Conv1, c.Conv2)
	for l, out := range append(append([]int(nil), c.Hidden...), c.Classes) {
		t = t.add(fmt.Sprintf("fc%d.w", l+1), out, in).add(fmt.Sprintf("fc%d.b", l+1), out)
		fmt.Fprintf(&name, ",fc%d", out)
		m.hs = append(m.hs, make([]float64, out))
		m.dhs = append(m.dhs, make([]float64, out))
		in = out
	}
	name.WriteString(")")
	m.name = name.String()
	m.tensors = t
	last := t[len(t)-1]
	m.np = last.Offset + last.Size

	n1, n2 := m.h1*m.w1, m.h2*m.w2
	m.w = make([]float64, m.np)
	m.g = make([]float64, m.np)
	m.x = make([]float64, c.Channels*c.Height*c.Width)
	m.col1 = make([]float64, n1*c.Channels*k*k)
	m.col2 = make([]float64, n2*c.Conv1*k*k)
	m.dcol2 = make([]float64, len(m.col2))
	m.a1, m.da1 = make([]float64, c.Conv1*n1), make([]float64, c.Conv1*n1)
	m.p1, m.dp1 = make([]float64, c.Conv1*m.ph1*m.pw1), make([]float64, c.Conv1*m.ph1*m.pw1)
	m.a2, m.da2 = make([]float64, c.Conv2*n2), make([]float64, c.Conv2*n2)
	m.p2, m.dp2 = make([]float64, m.feat), make([]float64, m.feat)
	m.idx1 = make([]int32, len(m.p1))
	m.idx2 = make([]int32, len(m.p2))
	return m, nil
}

// Name implements [Model], e.g. "cnn(1x28x28,conv6,conv16,fc120,fc84,fc10)".
func (m *CNN) Name() string { return m.name }

// NumParams implements [Model].
func (m *CNN) NumParams() int { return m.np }

// Config returns the configuration with its defaults filled in.
func (m *CNN) Config() CNNConfig {
	c := m.cfg
	c.Hidden = append([]int(nil), c.Hidden...)
	return c
}

// ForwardMACs returns the multiply-accumulates of one forward pass of one
// sample: Σ over the convolutions of filters · output positions ·
// in-channels · 25, plus Σ over the dense layers of in · out (416,520 for
// LeNet-5). Pooling, biases, activations and the softmax are not counted.
// The backward pass costs about twice as many (the gradients of the
// weights and of the inputs, the first layer's input gradient excepted),
// so a training step is about 3 · 2 · ForwardMACs floating-point
// operations per sample.
func (m *CNN) ForwardMACs() int {
	c := m.cfg
	k2 := cnnKernel * cnnKernel
	macs := c.Conv1*m.h1*m.w1*c.Channels*k2 + c.Conv2*m.h2*m.w2*c.Conv1*k2
	for i := 4; i < len(m.tensors); i += 2 {
		macs += m.tensors[i].Size
	}
	return macs
}

// Tensors implements [Layered]: conv1.w, conv1.b, conv2.w, conv2.b, then
// fc<l>.w and fc<l>.b for each dense layer, the output layer last.
func (m *CNN) Tensors() []Tensor {
	out := make([]Tensor, len(m.tensors))
	for i, t := range m.tensors {
		t.Shape = append([]int(nil), t.Shape...)
		out[i] = t
	}
	return out
}

// Clone implements [Model].
func (m *CNN) Clone() Model {
	c, err := NewCNN(m.cfg)
	if err != nil {
		panic(err) // m.cfg was validated
	}
	return c
}

// Init implements [Model]: He initialisation, every weight of a layer with
// fan-in n drawn from N(0, 2/n) (n = in-channels·25 for a convolution, the
// input width for a dense layer), in parameter order; biases 0.
func (m *CNN) Init(params []float32, rng *rand.Rand) {
	m.check(params)
	for i := 0; i < len(m.tensors); i += 2 {
		wt, bt := m.tensors[i], m.tensors[i+1]
		s := math.Sqrt(2 / float64(wt.Size/wt.Shape[0]))
		for j := range wt.Size {
			params[wt.Offset+j] = float32(s * rng.NormFloat64())
		}
		clear(params[bt.Offset : bt.Offset+bt.Size])
	}
}

func (m *CNN) check(params []float32) {
	if len(params) != m.np {
		panic(fmt.Sprintf("model: %s: len(params)=%d, want %d", m.name, len(params), m.np))
	}
}

func (m *CNN) checkData(data *Dataset) {
	if data.D != m.cfg.Channels*m.cfg.Height*m.cfg.Width || data.Classes > m.cfg.Classes {
		panic(fmt.Sprintf("model: %s: dataset is %d-dim with %d classes", m.name, data.D, data.Classes))
	}
}

// load converts the parameters to float64.
func (m *CNN) load(params []float32) {
	for i, v := range params {
		m.w[i] = float64(v)
	}
}

func (m *CNN) param(t int) []float64 {
	x := m.tensors[t]
	return m.w[x.Offset : x.Offset+x.Size]
}

func (m *CNN) grad(t int) []float64 {
	x := m.tensors[t]
	return m.g[x.Offset : x.Offset+x.Size]
}

// forward runs one image through the network and returns the logits.
func (m *CNN) forward(row []float32) []float64 {
	c := m.cfg
	for i, v := range row {
		m.x[i] = float64(v)
	}
	im2col(m.x, c.Channels, c.Height, c.Width, c.padding(), m.h1, m.w1, m.col1)
	convForward(m.param(0), m.param(1), m.col1, m.h1*m.w1, m.a1)
	maxPool(m.a1, c.Conv1, m.h1, m.w1, m.p1, m.idx1)
	im2col(m.p1, c.Conv1, m.ph1, m.pw1, 0, m.h2, m.w2, m.col2)
	convForward(m.param(2), m.param(3), m.col2, m.h2*m.w2, m.a2)
	maxPool(m.a2, c.Conv2, m.h2, m.w2, m.p2, m.idx2)
	in := m.p2
	last := len(m.hs) - 1
	for l, out := range m.hs {
		copy(out, m.param(5+2*l))
		blasimpl.Implementation{}.Dgemv(blas.NoTrans, len(out), len(in), 1, m.param(4+2*l), len(in), in, 1, 1, out, 1)
		if l < last {
			relu(out)
		}
		in = out
	}
	return m.hs[last]
}

// backward adds scale times the gradient of −log softmax(z)_y, for the
// image last passed to forward, into m.g.
func (m *CNN) backward(y int, scale float64) {
	impl := blasimpl.Implementation{}
	last := len(m.hs) - 1
	z, dz := m.hs[last], m.dhs[last]
	lse := logSumExp(z)
	for k, v := range z {
		dz[k] = scale * math.Exp(v-lse)
	}
	dz[y] -= scale
	for l := last; l >= 0; l-- {
		in, din := m.p2, m.dp2
		if l > 0 {
			in, din = m.hs[l-1], m.dhs[l-1]
		}
		dout := m.dhs[l]
		gb := m.grad(5 + 2*l)
		for i, v := range dout {
			gb[i] += v
		}
		impl.Dger(len(dout), len(in), 1, dout, 1, in, 1, m.grad(4+2*l), len(in))
		impl.Dgemv(blas.Trans, len(dout), len(in), 1, m.param(4+2*l), len(in), dout, 1, 0, din, 1)
		if l > 0 {
			for i, v := range in {
				if v <= 0 {
					din[i] = 0
				}
			}
		}
	}
	c := m.cfg
	kk2, n2 := c.Conv1*cnnKernel*cnnKernel, m.h2*m.w2
	unpool(m.dp2, m.idx2, m.a2, m.da2)
	convBackward(m.da2, m.col2, c.Conv2, n2, kk2, m.grad(2), m.grad(3))
	// dcol2 (kk2×n2) = W2ᵀ (kk2×Conv2) · da2 (Conv2×n2)
	gemm(blas.Trans, blas.NoTrans, kk2, n2, c.Conv2, m.param(2), kk2, m.da2, n2, 0, m.dcol2, n2)
	clear(m.dp1)
	col2im(m.dcol2, c.Conv1, m.ph1, m.pw1, m.h2, m.w2, m.dp1)
	unpool(m.dp1, m.idx1, m.a1, m.da1)
	convBackward(m.da1, m.col1, c.Conv1, m.h1*m.w1, c.Channels*cnnKernel*cnnKernel, m.grad(0), m.grad(1))
}

// LossGrad implements [Model].
func (m *CNN) LossGrad(params []float32, data *Dataset, idx []int, grad []float32) float64 {
	m.check(params)
	m.checkData(data)
	if len(grad) != len(params) {
		panic(fmt.Sprintf("model: %s: len(grad)=%d, want %d", m.name, len(grad), len(params)))
	}
	clear(grad)
	if len(idx) == 0 {
		return 0
	}
	m.load(params)
	clear(m.g)
	inv := 1 / float64(len(idx))
	var loss float64
	for _, i := range idx {
		z := m.forward(data.Row(i))
		y := int(data.Y[i])
		loss += logSumExp(z) - z[y]
		m.backward(y, inv)
	}
	for i, v := range m.g {
		grad[i] = float32(v)
	}
	return loss * inv
}

// Evaluate implements [Model].
func (m *CNN) Evaluate(params []float32, data *Dataset, idx []int) (loss, acc float64) {
	m.check(params)
	m.checkData(data)
	n := len(idx)
	if idx == nil {
		n = data.N
	}
	if n == 0 {
		return 0, 0
	}
	m.load(params)
	correct := 0
	for r := range n {
		i := r
		if idx != nil {
			i = idx[r]
		}
		z := m.forward(data.Row(i))
		y := int(data.Y[i])
		loss += logSumExp(z) - z[y]
		if argmax(z) == y {
			correct++
		}
	}
	return loss / float64(n), float64(correct) / float64(n)
}

// im2col writes the 5×5 patches of the image in (ch×h×w, zero-padded by
// pad on each side) as the columns of col (ch·25 × oh·ow): row (c·5+ky)·5+kx
// holds, at column oy·ow+ox, the padded pixel (c, oy+ky, ox+kx). Each row
// is the image plane shifted by (ky, kx), so it is filled by contiguous
// copies.
func im2col(in []float64, ch, h, w, pad, oh, ow int, col []float64) {
	const k = cnnKernel
	n := oh * ow
	for c := range ch {
		plane := in[c*h*w : (c+1)*h*w]
		for ky := range k {
			for kx := range k {
				r := (c*k+ky)*k + kx
				dst := col[r*n : (r+1)*n]
				x0 := kx - pad
				lo, hi := max(0, -x0), min(ow, w-x0)
				for oy := range oh {
					seg := dst[oy*ow : (oy+1)*ow]
					y := oy + ky - pad
					if y < 0 || y >= h || lo >= hi {
						clear(seg)
						continue
					}
					clear(seg[:lo])
					copy(seg[lo:hi], plane[y*w+lo+x0:y*w+hi+x0])
					clear(seg[hi:])
				}
			}
		}
	}
}

// col2im adds the patch gradients dcol (laid out as im2col's, no padding)
// into the image gradient din (ch×h×w).
func col2im(dcol []float64, ch, h, w, oh, ow int, din []float64) {
	const k = cnnKernel
	n := oh * ow
	for c := range ch {
		plane := din[c*h*w : (c+1)*h*w]
		for ky := range k {
			for kx := range k {
				r := (c*k+ky)*k + kx
				src := dcol[r*n : (r+1)*n]
				for oy := range oh {
					dst := plane[(oy+ky)*w+kx : (oy+ky)*w+kx+ow]
					for ox, v := range src[oy*ow : (oy+1)*ow] {
						dst[ox] += v
					}
				}
			}
		}
	}
}

// convForward computes the pre-activations a = W·col + b: a is filters×n
// (n output positions), W is filters×kk and col is kk×n. The relu is
// applied after the pooling (max-pool and relu commute).
func convForward(w, b, col []float64, n int, a []float64) {
	f := len(b)
	kk := len(w) / f
	for i, bv := range b {
		row := a[i*n : (i+1)*n]
		for j := range row {
			row[j] = bv
		}
	}
	gemm(blas.NoTrans, blas.NoTrans, f, n, kk, w, kk, col, n, 1, a, n)
}

// convBackward adds dW += da·colᵀ (filters×kk) and db += the row sums of
// da (filters×n).
func convBackward(da, col []float64, f, n, kk int, gw, gb []float64) {
	gemm(blas.NoTrans, blas.Trans, f, kk, n, da, n, col, n, 1, gw, kk)
	for i := range f {
		var s float64
		for _, v := range da[i*n : (i+1)*n] {
			s += v
		}
		gb[i] += s
	}
}

// maxPool writes relu(the maximum of each 2×2 window of a (ch×h×w)) into
// p (ch×h/2×w/2) and records in idx the index into a of each maximum (the
// first on ties).
func maxPool(a []float64, ch, h, w int, p []float64, idx []int32) {
	ph, pw := h/cnnPool, w/cnnPool
	o := 0
	for c := range ch {
		for py := range ph {
			for px := range pw {
				best := c*h*w + py*cnnPool*w + px*cnnPool
				for dy := range cnnPool {
					for dx := range cnnPool {
						if j := c*h*w + (py*cnnPool+dy)*w + px*cnnPool + dx; a[j] > a[best] {
							best = j
						}
					}
				}
				p[o] = max(a[best], 0)
				idx[o] = int32(best)
				o++
			}
		}
	}
}

// unpool routes the gradient dp of relu(max-pool(a)) back to the maxima
// idx of a, through the relu (zero where the maximum is not positive),
// into da.
func unpool(dp []float64, idx []int32, a, da []float64) {
	clear(da)
	for i, j := range idx {
		if a[j] > 0 {
			da[j] = dp[i]
		}
	}
}

func relu(x []float64) {
	for i, v := range x {
		if v < 0 {
			x[i] = 0
		}
	}
}

// gemm computes C = A·B + beta·C (A and B transposed as tA, tB say) with
// gonum's Dgemm, cut into tiles of at most gemmRows × gemmCols outputs.
// Gonum's Dgemm spreads a product over goroutines once it spans four
// 64×64 blocks of C; one tile spans at most three, so every call stays on
// the calling goroutine and allocates nothing. Each output is summed over
// k in the same order either way.
func gemm(tA, tB blas.Transpose, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	const gemmRows, gemmCols = 64, 192
	impl := blasimpl.Implementation{}
	for i := 0; i < m; i += gemmRows {
		mi := min(gemmRows, m-i)
		as := a[i:]
		if tA == blas.NoTrans {
			as = a[i*lda:]
		}
		for j := 0; j < n; j += gemmCols {
			nj := min(gemmCols, n-j)
			bs := b[j:]
			if tB == blas.Trans {
				bs = b[j*ldb:]
			}
			impl.Dgemm(tA, tB, mi, nj, k, 1, as, lda, bs, ldb, beta, c[i*ldc+j:], ldc)
		}
	}
}
