package datasets

import (
	"crypto/sha256"
	"encoding/hex"
	"image"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Images within the budget load as the same bytes as before it: every
// kind of costCases decoded with both filters at two sizes, and a folder of
// them, hash to what the loader gave before the budget existed (the hashes
// were taken with the code of commit 62424c3).
func TestDecodedBytesUnchanged(t *testing.T) {
	cases := costCases(t)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		for _, side := range []int{84, 28} {
			for _, f := range []resizeFilter{filterArea, filterBilinearAligned} {
				dst := make([]uint8, side*side*3)
				var s rgbScratch
				if err := decodeRGBWith(n, cases[n], side, side, dst, &s, f); err != nil {
					t.Fatalf("%s: %v", n, err)
				}
				h.Write(dst)
			}
		}
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), "86f902dbeaa5d728f467d9a6664cfa1f91ae56ae595ab68e748471364ee3011b"; got != want {
		t.Errorf("decoded images hash to %s, want %s", got, want)
	}
	dir := t.TempDir()
	for i, n := range names {
		ext := ".png"
		if cases[n][0] == 0xff {
			ext = ".jpg"
		}
		c := filepath.Join(dir, "class"+string(rune('a'+i%3)))
		os.MkdirAll(c, 0o755)
		writeFile(t, filepath.Join(c, n+ext), cases[n])
	}
	writeFile(t, filepath.Join(dir, "classa", "gray16.png"), encodePNGImage(image.NewGray16(image.Rect(0, 0, 3, 2))))
	s, err := LoadFolder(dir, FolderOptions{ImageOptions: ImageOptions{Side: 84, NoCache: true}})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(s.pix)
	if got, want := hex.EncodeToString(sum[:]), "d1795af5f103dd2bb58fbd00ebd259107cdd12d5d22f3c2dfbc85aa394206db5"; got != want {
		t.Errorf("the folder's images hash to %s, want %s", got, want)
	}
}
