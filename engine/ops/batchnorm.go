package ops

import (
	"errors"
	"fmt"
	"math"
)

// Batch normalization of images (channels-last, statistics per channel over
// images and pixels), as the ResNet backbone uses it, and on its own.
//
// What the Meta-Dataset reference does (meta_dataset/models/
// functional_backbones.py bn, learners/metric_learners.py, gin
// LearnConfig.transductive_batch_norm = False, bn.use_ema = False): in
// training and in evaluation alike, each episode's support images are
// normalized with their own mean and (biased) variance, and its query
// images with those same support moments, gradients flowing through the
// moments (backprop_through_moments = True); no running averages are used
// (its bn keeps an optional exponential moving average, decay 0.9, off by
// default). BNTrain and BNEpisode do that; BNLayout.Transductive uses the
// support and query images of an episode together instead. Running means
// and variances (BNStats) are kept anyway, folded after every training
// forward with momentum BNMomentum, so that BNRunning can evaluate with
// them.

// BNMode says which statistics a batch normalization uses.
type BNMode int

const (
	// BNTrain normalizes each episode with its own statistics (BNLayout)
	// and keeps them for folding into the running statistics.
	BNTrain BNMode = iota
	// BNEpisode normalizes each episode with its own statistics and keeps
	// the running statistics as they are: the reference's evaluation.
	BNEpisode
	// BNRunning normalizes every image with the running statistics.
	BNRunning
)

func (m BNMode) String() string {
	switch m {
	case BNTrain:
		return "train"
	case BNEpisode:
		return "episode"
	case BNRunning:
		return "running"
	}
	return fmt.Sprintf("BNMode(%d)", int(m))
}

// BNLayout says how a batch of images forms episodes: first Episodes·Support
// support images (episode e's are e·Support … (e+1)·Support−1), then
// Episodes·Query query images in the same order, which is how the engine
// lays out a meta-batch. An episode's statistics are those of its support
// images, or of all its images if Transductive.
type BNLayout struct {
	Episodes, Support, Query int
	Transductive             bool
}

// BNBatch is the layout of n images normalized together.
func BNBatch(n int) BNLayout { return BNLayout{Episodes: 1, Support: n} }

// Images is the number of images in the batch.
func (l BNLayout) Images() int { return l.Episodes * (l.Support + l.Query) }

// Validate reports whether the layout can normalize in mode m.
func (l BNLayout) Validate(m BNMode) error {
	switch {
	case l.Episodes < 1 || l.Support < 0 || l.Query < 0 || l.Images() < 1:
		return fmt.Errorf("batchnorm: layout %+v, want ≥ 1 episode of ≥ 1 image", l)
	case m != BNRunning && l.Support < 1 && !l.Transductive:
		return fmt.Errorf("batchnorm: layout %+v has no support images to take statistics from", l)
	case m < BNTrain || m > BNRunning:
		return fmt.Errorf("batchnorm: unknown mode %d", int(m))
	}
	return nil
}

// ranges returns the support and query images of episode e.
func (l BNLayout) ranges(e int) (sup, qry [2]int) {
	es := l.Episodes * l.Support
	return [2]int{e * l.Support, (e + 1) * l.Support}, [2]int{es + e*l.Query, es + (e+1)*l.Query}
}

// episode returns the episode of image i and whether its statistics count.
func (l BNLayout) episode(i int) (e int, stat bool) {
	if es := l.Episodes * l.Support; i < es {
		return i / l.Support, true
	}
	return (i - l.Episodes*l.Support) / l.Query, l.Transductive
}

// BNMomentum is the weight of the old running statistics in each update:
// running = BNMomentum·running + (1 − BNMomentum)·batch, the reference's
// ema_epsilon.
const BNMomentum = 0.9

// bnEps is added to the variance, as the reference's
// tf.nn.batch_normalization(…, 1e-5).
const bnEps = 1e-5

// BNStats are the running mean and (biased) variance of one batch norm's
// channels: non-trainable state.
type BNStats struct{ Mean, Var []float64 }

// NewBNStats returns the starting running statistics of c channels.
func NewBNStats(c int) BNStats {
	s := BNStats{Mean: make([]float64, c), Var: make([]float64, c)}
	for i := range s.Var {
		s.Var[i] = 1
	}
	return s
}

// bnState is one batch norm's working state in precision F: what the
// forward pass computed (the statistics used, per episode) and the
// coefficients of the backward pass. Per-image sums are computed in
// parallel, one image per goroutine; everything that combines images runs
// serially in image order, so results do not depend on the number of
// cores.
type bnState[F float] struct {
	c, p          int // channels; pixels per image
	lay           BNLayout
	mode          BNMode
	ne            int       // episodes with statistics of their own (1 in running mode)
	mean, istd    []float64 // ne×c: the statistics used; 1/√(var+ε)
	vr            []float64 // ne×c: the batch variance, for the running update
	scale, shift  []F       // ne×c: y = z·scale + shift
	s1, s2        []float64 // per image ×c: Σz, Σz² (forward) or Σg, Σg·z (backward)
	k1, k2, k3    []F       // ne×c: dz = k1·g + k2 + k3·z (k2, k3 for statistics images)
	gGamma, gBeta []float64 // c
	db, dzg       []float64 // c: an episode's Σg and Σg·z
	folded        bool      // the statistics of the last training pass were folded
}

// setup sizes the state for the layout's images in mode m.
func (s *bnState[F]) setup(c, p int, lay BNLayout, m BNMode) {
	s.c, s.p, s.lay, s.mode = c, p, lay, m
	s.ne = lay.Episodes
	if m == BNRunning {
		s.ne = 1
	}
	n := lay.Images()
	grow := func(b []float64, k int) []float64 {
		if cap(b) < k {
			return make([]float64, k)
		}
		return b[:k]
	}
	growF := func(b []F, k int) []F {
		if cap(b) < k {
			return make([]F, k)
		}
		return b[:k]
	}
	s.mean, s.istd, s.vr = grow(s.mean, s.ne*c), grow(s.istd, s.ne*c), grow(s.vr, s.ne*c)
	s.scale, s.shift = growF(s.scale, s.ne*c), growF(s.shift, s.ne*c)
	s.k1, s.k2, s.k3 = growF(s.k1, s.ne*c), growF(s.k2, s.ne*c), growF(s.k3, s.ne*c)
	s.s1, s.s2 = grow(s.s1, n*c), grow(s.s2, n*c)
	s.gGamma, s.gBeta = grow(s.gGamma, c), grow(s.gBeta, c)
	s.db, s.dzg = grow(s.db, c), grow(s.dzg, c)
	s.folded = m != BNTrain
}

// ep returns where image i's coefficients are and whether its values
// entered the statistics.
func (s *bnState[F]) ep(i int) (off int, stat bool) {
	if s.mode == BNRunning {
		return 0, false
	}
	e, stat := s.lay.episode(i)
	return e * s.c, stat
}

// coef returns the forward coefficients of image i.
func (s *bnState[F]) coef(i int) (scale, shift []F) {
	o, _ := s.ep(i)
	return s.scale[o : o+s.c], s.shift[o : o+s.c]
}

// sumImage computes the channel sums of image i's values z (p×c) for
// the statistics.
func (s *bnState[F]) sumImage(i int, z []F) {
	if _, stat := s.ep(i); !stat {
		return
	}
	s1, s2 := s.s1[i*s.c:(i+1)*s.c], s.s2[i*s.c:(i+1)*s.c]
	clear(s1)
	clear(s2)
	for q := range s.p {
		row := z[q*s.c : (q+1)*s.c]
		for ch, v := range row {
			f := float64(v)
			s1[ch] += f
			s2[ch] += f * f
		}
	}
}

// addImages adds the per-image sums of images [r[0], r[1]) to a and b.
func (s *bnState[F]) addImages(a, b []float64, r [2]int) {
	for i := r[0]; i < r[1]; i++ {
		for ch := range a {
			a[ch] += s.s1[i*s.c+ch]
			b[ch] += s.s2[i*s.c+ch]
		}
	}
}

// moments sets the statistics and forward coefficients from the image sums
// (or from run in running mode) and γ, β.
func (s *bnState[F]) moments(gamma, beta []float64, run *BNStats) {
	c := s.c
	for e := range s.ne {
		mean, vr := s.mean[e*c:(e+1)*c], s.vr[e*c:(e+1)*c]
		if s.mode == BNRunning {
			copy(mean, run.Mean)
			copy(vr, run.Var)
		} else {
			clear(mean)
			clear(vr)
			sup, qry := s.lay.ranges(e)
			s.addImages(mean, vr, sup)
			cnt := sup[1] - sup[0]
			if s.lay.Transductive {
				s.addImages(mean, vr, qry)
				cnt += qry[1] - qry[0]
			}
			m := float64(cnt * s.p)
			for ch := range mean {
				mean[ch] /= m
				vr[ch] = max(vr[ch]/m-mean[ch]*mean[ch], 0)
			}
		}
		for ch := range mean {
			is := 1 / math.Sqrt(vr[ch]+bnEps)
			s.istd[e*c+ch] = is
			a := gamma[ch] * is
			s.scale[e*c+ch], s.shift[e*c+ch] = F(a), F(beta[ch]-mean[ch]*a)
		}
	}
}

// fold folds the statistics of the last training pass into run, episode
// by episode in order (the reference updates once per episode).
func (s *bnState[F]) fold(run *BNStats) {
	if s.folded {
		return
	}
	for e := range s.ne {
		for ch := range run.Mean {
			run.Mean[ch] = BNMomentum*run.Mean[ch] + (1-BNMomentum)*s.mean[e*s.c+ch]
			run.Var[ch] = BNMomentum*run.Var[ch] + (1-BNMomentum)*s.vr[e*s.c+ch]
		}
	}
	s.folded = true
}

// gradSums computes the channel sums Σg and Σg·z of image i from the
// gradient g w.r.t. the normalized output and the values z.
func (s *bnState[F]) gradSums(i int, g, z []F) {
	s1, s2 := s.s1[i*s.c:(i+1)*s.c], s.s2[i*s.c:(i+1)*s.c]
	clear(s1)
	clear(s2)
	for q := range s.p {
		gr, zr := g[q*s.c:(q+1)*s.c], z[q*s.c:(q+1)*s.c]
		for ch, v := range gr {
			f := float64(v)
			s1[ch] += f
			s2[ch] += f * float64(zr[ch])
		}
	}
}

// gradCoefs sets the gradients of γ and β and the coefficients of the
// input gradient from the image sums. With y = γ·x̂ + β, x̂ = (z − μ)·istd
// and μ, σ² taken over the M values of the statistics images S of an
// episode whose images are A:
//
//	dz = γ·istd·g                                            (every image)
//	     − γ·istd/M·(Σ_A g + x̂·Σ_A g·x̂)                       (images in S)
func (s *bnState[F]) gradCoefs(gamma []float64) {
	c := s.c
	clear(s.gGamma)
	clear(s.gBeta)
	db, dzg := s.db, s.dzg
	for e := range s.ne {
		clear(db)
		clear(dzg)
		cnt := 0
		if s.mode == BNRunning {
			s.addImages(db, dzg, [2]int{0, s.lay.Images()})
		} else {
			sup, qry := s.lay.ranges(e)
			s.addImages(db, dzg, sup)
			s.addImages(db, dzg, qry)
			cnt = sup[1] - sup[0]
			if s.lay.Transductive {
				cnt += qry[1] - qry[0]
			}
		}
		m := float64(cnt * s.p)
		for ch := range db {
			mean, is := s.mean[e*c+ch], s.istd[e*c+ch]
			dg := (dzg[ch] - mean*db[ch]) * is // Σ g·x̂
			s.gGamma[ch] += dg
			s.gBeta[ch] += db[ch]
			s.k1[e*c+ch] = F(gamma[ch] * is)
			if cnt == 0 {
				s.k2[e*c+ch], s.k3[e*c+ch] = 0, 0
				continue
			}
			k3 := -gamma[ch] * dg * is * is / m
			s.k3[e*c+ch] = F(k3)
			s.k2[e*c+ch] = F(-gamma[ch]*is*db[ch]/m - k3*mean)
		}
	}
}

// gradInput writes image i's gradient w.r.t. z into dz (which may be z).
func (s *bnState[F]) gradInput(i int, dz, g, z []F) {
	o, stat := s.ep(i)
	k1 := s.k1[o : o+s.c]
	if !stat {
		for q := range s.p {
			dr, gr := dz[q*s.c:(q+1)*s.c], g[q*s.c:(q+1)*s.c]
			for ch, v := range gr {
				dr[ch] = k1[ch] * v
			}
		}
		return
	}
	k2, k3 := s.k2[o:o+s.c], s.k3[o:o+s.c]
	for q := range s.p {
		dr, gr, zr := dz[q*s.c:(q+1)*s.c], g[q*s.c:(q+1)*s.c], z[q*s.c:(q+1)*s.c]
		for ch, v := range gr {
			dr[ch] = k1[ch]*v + k2[ch] + k3[ch]*zr[ch]
		}
	}
}

// BatchNorm is batch normalization of images (Pixels × Channels each,
// channels-last) on plain float64 slices: the ResNet kernel's batch norm on
// its own. It keeps its input for Backward. Not safe for concurrent use.
type BatchNorm struct {
	st      bnState[float64]
	z       []float64
	fwdDone bool
}

// NewBatchNorm returns a batch norm of images with the given channels and
// pixels.
func NewBatchNorm(channels, pixels int) (*BatchNorm, error) {
	if channels < 1 || pixels < 1 {
		return nil, fmt.Errorf("batchnorm: %d channels and %d pixels, want ≥ 1 of each", channels, pixels)
	}
	return &BatchNorm{st: bnState[float64]{c: channels, p: pixels}}, nil
}

// Forward normalizes the images x (layout's images × pixels × channels)
// with scale gamma and shift beta (one per channel) into out, with the
// statistics mode chooses; running is read in BNRunning mode only.
func (b *BatchNorm) Forward(x, gamma, beta []float64, lay BNLayout, mode BNMode, running *BNStats, out []float64) error {
	c, p := b.st.c, b.st.p
	if err := lay.Validate(mode); err != nil {
		return err
	}
	n := lay.Images()
	switch {
	case len(x) != n*p*c || len(out) != n*p*c:
		return fmt.Errorf("batchnorm: x has %d and out %d values, want %d", len(x), len(out), n*p*c)
	case len(gamma) != c || len(beta) != c:
		return fmt.Errorf("batchnorm: γ has %d and β %d values, want %d", len(gamma), len(beta), c)
	case mode == BNRunning && (running == nil || len(running.Mean) != c || len(running.Var) != c):
		return errors.New("batchnorm: running mode needs running statistics of every channel")
	}
	b.st.setup(c, p, lay, mode)
	b.z = append(b.z[:0], x...)
	for i := range n {
		b.st.sumImage(i, x[i*p*c:(i+1)*p*c])
	}
	b.st.moments(gamma, beta, running)
	for i := range n {
		scale, shift := b.st.coef(i)
		for q := range p {
			o := (i*p + q) * c
			for ch := range c {
				out[o+ch] = x[o+ch]*scale[ch] + shift[ch]
			}
		}
	}
	b.fwdDone = true
	return nil
}

// Fold folds the statistics of the last BNTrain Forward into running, once.
func (b *BatchNorm) Fold(running *BNStats) { b.st.fold(running) }

// Backward propagates gOut (the gradient w.r.t. the last Forward's output)
// and overwrites gx, gGamma and gBeta with the gradients w.r.t. x, γ and β.
func (b *BatchNorm) Backward(gOut, gamma, gx, gGamma, gBeta []float64) error {
	if !b.fwdDone {
		return errors.New("batchnorm: Backward before Forward")
	}
	c, p, n := b.st.c, b.st.p, b.st.lay.Images()
	if len(gOut) != n*p*c || len(gx) != n*p*c || len(gamma) != c || len(gGamma) != c || len(gBeta) != c {
		return fmt.Errorf("batchnorm: gradients of %d, %d, %d, %d values, want %d, %d, %d, %d",
			len(gOut), len(gx), len(gGamma), len(gBeta), n*p*c, n*p*c, c, c)
	}
	for i := range n {
		b.st.gradSums(i, gOut[i*p*c:(i+1)*p*c], b.z[i*p*c:(i+1)*p*c])
	}
	b.st.gradCoefs(gamma)
	for i := range n {
		b.st.gradInput(i, gx[i*p*c:(i+1)*p*c], gOut[i*p*c:(i+1)*p*c], b.z[i*p*c:(i+1)*p*c])
	}
	copy(gGamma, b.st.gGamma)
	copy(gBeta, b.st.gBeta)
	return nil
}
