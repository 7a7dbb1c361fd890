package ops

// convMaskIndex is where the mask of pixel (y, x) of a block starts in the
// image's dropout stream, which is laid out window-major: window by window
// (row-major over the pooled map), the window's cells (0,0), (0,1), (1,0),
// (1,1), the filters of a cell contiguous; cells that an odd size cuts off
// keep their places. Both paths apply dropout as they pool, one window at a
// time, and so read the stream in order.
func convMaskIndex(ly convLayer, y, x, nf int) int {
	return (((y/2)*ly.wo+x/2)*4 + (y%2)*2 + x%2) * nf
}
