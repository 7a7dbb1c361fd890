package task

// ShiftImage moves the h×w×c image img (channels-last) by dy rows and dx
// columns (pixel (y, x) to (y+dy, x+dx)) in place, through tmp (h·w·c
// values); uncovered pixels become zero, pixels pushed past the edge are
// dropped. Training augmentation (datasets.Shifted) and the engine's
// evaluation with shifted support copies (Config.EvalSupportShift) both
// move images with it.
func ShiftImage(img, tmp []float64, h, w, c, dy, dx int) {
	if dy == 0 && dx == 0 {
		return
	}
	clear(tmp)
	x0, x1 := max(0, -dx), min(w, w-dx) // source columns that stay in the frame
	if x0 < x1 {
		for y := max(0, -dy); y < min(h, h-dy); y++ {
			copy(tmp[((y+dy)*w+x0+dx)*c:((y+dy)*w+x1+dx)*c], img[(y*w+x0)*c:(y*w+x1)*c])
		}
	}
	copy(img, tmp)
}
