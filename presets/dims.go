package presets

import "github.com/mkbench/mkbench/engine"

// Dims are the widths of a task family's inputs and targets for cfg, as
// its sources will report them, known without loading any data: an image
// family's pixels (channels·height·width of cfg.Conv), the 640-d
// embeddings, sine's single x; targets are one-hot over the way when
// classifying, one value otherwise. Memory estimates use them before
// anything is allocated.
func Dims(family string, cfg engine.Config) (in, out int) {
	switch {
	case cfg.Conv != nil:
		in = cfg.Conv.Channels * cfg.Conv.Height * cfg.Conv.Width
	case cfg.ResNet != nil:
		in = cfg.ResNet.InDim()
	case family == "embeddings":
		in = 640
	default:
		in = 1
	}
	return in, max(cfg.Way, 1)
}

// DataBytes is the memory a family's task sources hold besides the
// model, for memory estimates: Omniglot's measured ~1 GiB (images,
// decoding, the sampler's buffers); the other image sets that and their
// ~60,000 images as bytes (not measured); nothing for sine.
func DataBytes(family string, cfg engine.Config) uint64 {
	switch {
	case family == "sine":
		return 0
	case family == "omniglot":
		return 1 << 30
	case cfg.Conv != nil:
		return 1<<30 + 60000*uint64(cfg.Conv.Channels*cfg.Conv.Height*cfg.Conv.Width)
	case cfg.ResNet != nil:
		return 1<<30 + 60000*uint64(cfg.ResNet.InDim())
	}
	return 1<<30 + 60000*640*8
}
