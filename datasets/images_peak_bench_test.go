package datasets

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkFolderDecodePeakRSS loads a folder of large images and reports
// the process's peak resident memory (VmHWM), the figure of the memory
// rule of image decoding. VmHWM is the whole process's, so run one
// sub-benchmark and one -cpu per process:
//
//	go test ./datasets -run '^$' -bench 'FolderDecodePeakRSS/hostile' -benchtime 1x -cpu 2
//	go test ./datasets -run '^$' -bench 'FolderDecodePeakRSS/hostile' -benchtime 1x -cpu 6
//	go test ./datasets -run '^$' -bench 'FolderDecodePeakRSS/photos' -benchtime 1x -cpu 2
//	go test ./datasets -run '^$' -bench 'FolderDecodePeakRSS/photos' -benchtime 1x -cpu 6
//
// hostile: 16-bit 8192×8192 PNGs (0.65 MB each) and progressive 4:4:4
// 8192×8192 JPEGs, refused from their headers now, decoded GOMAXPROCS at a
// time before. photos: 12-megapixel images within the budget, 16-bit PNGs
// and progressive JPEGs, decoded through the gate. The folders are written
// once under $TMPDIR/mkbench-peak (streamed, so writing them takes little
// memory); the JPEGs need libjpeg-turbo's cjpeg and are left out without
// it.
func BenchmarkFolderDecodePeakRSS(b *testing.B) {
	for _, kind := range []struct {
		name string
		w, h int
	}{{"hostile", 8192, 8192}, {"photos", 4032, 3024}} {
		b.Run(kind.name, func(b *testing.B) {
			dir := filepath.Join(os.TempDir(), "mkbench-peak", kind.name)
			peakFolder(b, dir, kind.w, kind.h)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, err := LoadFolder(dir, FolderOptions{ImageOptions: ImageOptions{Side: 84, NoCache: true}})
				if err != nil {
					b.Logf("refused: %v", err)
				} else {
					b.Logf("loaded %d images", s.NumImages())
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(vmHWM(b))/(1<<20), "peak-RSS-MB")
		})
	}
}

// peakFolder writes, unless it is there, dir/<class>/ of 16-bit RGB PNGs
// and progressive JPEGs of w×h, six of each kind over two classes.
func peakFolder(b *testing.B, dir string, w, h int) {
	done := filepath.Join(dir, ".done")
	if _, err := os.Stat(done); err == nil {
		return
	}
	cjpeg, _ := exec.LookPath("cjpeg")
	if cjpeg == "" {
		b.Log("cjpeg not found (Debian: libjpeg-turbo-progs): the folder has no progressive JPEGs")
	}
	for c := 0; c < 2; c++ {
		cd := filepath.Join(dir, fmt.Sprintf("class%d", c))
		if err := os.MkdirAll(cd, 0o755); err != nil {
			b.Fatal(err)
		}
		for k := 0; k < 3; k++ {
			seed := c*3 + k
			// Bands of flat grey: the file is small (0.65 MB at
			// 8192×8192), the pixels many.
			writePNGFile(b, filepath.Join(cd, fmt.Sprintf("p%d.png", k)), pngSpec{w: w, h: h, depth: 16, ctype: 2}, func(y int, buf []byte) {
				v := byte(seed*40 + y/512)
				for i := range buf {
					buf[i] = v
				}
			})
			if cjpeg != "" {
				progressiveJPEG(b, cjpeg, filepath.Join(cd, fmt.Sprintf("j%d.jpg", k)), w, h, seed)
			}
		}
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		b.Fatal(err)
	}
}

// progressiveJPEG has cjpeg write a progressive 4:4:4 JPEG of a smooth
// w×h pattern, fed as a PPM a row at a time.
func progressiveJPEG(b *testing.B, cjpeg, path string, w, h, seed int) {
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(cjpeg, "-progressive", "-sample", "1x1", "-quality", "90")
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriter(in)
	fmt.Fprintf(bw, "P6\n%d %d\n255\n", w, h)
	row := make([]byte, 3*w)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			row[3*x], row[3*x+1], row[3*x+2] = byte(x*255/w), byte(y*255/h), byte((x/64+y/64+seed)*8)
		}
		bw.Write(row)
	}
	bw.Flush()
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("cjpeg: %v: %s", err, stderr.Bytes())
	}
}

// vmHWM is the process's peak resident memory in bytes, from
// /proc/self/status.
func vmHWM(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if f := bytes.Fields(line); len(f) == 3 && string(f[0]) == "VmHWM:" {
			kb, _ := strconv.ParseInt(string(f[1]), 10, 64)
			return kb << 10
		}
	}
	b.Skip("no VmHWM")
	return 0
}
