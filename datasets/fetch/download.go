package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// maxRedirects bounds the redirects a download follows (GitHub's raw
// files take one or two).
const maxRedirects = 5

// NewClient returns the HTTP client of downloads: time limits on
// connecting, the TLS handshake and the response's headers (the body has
// Options.Stall instead, as a large file may take long but must keep
// coming), at most maxRedirects redirects, to http or https only.
func NewClient(userAgent string) *http.Client {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  http.ProxyFromEnvironment,
			DialContext:            dialer.DialContext,
			TLSHandshakeTimeout:    30 * time.Second,
			ResponseHeaderTimeout:  time.Minute,
			IdleConnTimeout:        time.Minute,
			MaxResponseHeaderBytes: 64 << 10,
			// The files are archives already; and a resumed Range must
			// count the same bytes the first request wrote.
			DisableCompression: true,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirected to a %s URL; only http and https are fetched", req.URL.Scheme)
			}
			return nil
		},
	}
}

// downloadPart brings the part file of file up to a whole download from
// url: it asks for the bytes after those already there (HTTP Range),
// starts from zero when the server sends the whole file instead, and
// never writes past the largest accepted size. A part that resumed and
// then fails its checksum is downloaded once more from zero, as its old
// bytes may be the damaged ones.
func downloadPart(ctx context.Context, file File, url, part string, opts Options) error {
	resumed, err := fetchInto(ctx, file, url, part, opts)
	if err != nil || !resumed {
		return err
	}
	if _, err := verifyPart(file, part); !errors.Is(err, ErrChecksum) {
		return nil // right, or cut again: the caller's verifyPart says which
	}
	// verifyPart removed the part; the retry starts from zero.
	_, err = fetchInto(ctx, file, url, part, opts)
	return err
}

// fetchInto runs one request; resumed says the part kept bytes from an
// earlier try.
func fetchInto(ctx context.Context, file File, url, part string, opts Options) (resumed bool, err error) {
	f, err := openPart(part)
	if err != nil {
		return false, err
	}
	defer f.Close()
	defer func() {
		// A request that failed before a byte came leaves no empty part.
		if st, serr := os.Lstat(part); err != nil && serr == nil && st.Mode().IsRegular() && st.Size() == 0 {
			os.Remove(part)
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	limit := file.maxSize()
	have := st.Size()
	if have > limit {
		// Longer than any form of the file: not a prefix of it.
		have = 0
		if err := f.Truncate(0); err != nil {
			return false, err
		}
	}
	if have == limit {
		return true, nil // whole already; the checksum decides
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, fmt.Errorf("%s: %w", url, err)
	}
	req.Header.Set("User-Agent", userAgent(opts.UserAgent))
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := opts.Client.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL follows once, below
		}
		return false, fmt.Errorf("downloading %s from %s: %w (no network? get the files elsewhere and pass --from DIR)", file.Name, url, err)
	}
	defer resp.Body.Close()

	// restart begins again from zero, once: a request without Range that
	// still gets a partial answer is an error.
	restart := func(why string) (bool, error) {
		if have == 0 {
			return false, fmt.Errorf("downloading %s: the server %s for %s", file.Name, why, url)
		}
		resp.Body.Close()
		if err := f.Truncate(0); err != nil {
			return false, err
		}
		f.Close()
		return fetchInto(ctx, file, url, part, opts)
	}
	start := int64(0)
	switch resp.StatusCode {
	case http.StatusPartialContent:
		first, _, _, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || first != have {
			// Not the bytes asked for: begin again with the whole file.
			return restart(fmt.Sprintf("sent the bytes from %d when asked for those from %d", first, have))
		}
		start = have
	case http.StatusOK:
		// The server ignores Range (or there was none): the body is the
		// whole file.
	case http.StatusRequestedRangeNotSatisfiable:
		// Nothing after what is here: whole if its size is right, else
		// not a prefix of the file (the checksum, or a fresh start, tells).
		if sizeAccepted(file, have) {
			return true, nil
		}
		return restart("answered " + resp.Status)
	default:
		return false, fmt.Errorf("downloading %s: the server answered %s for %s", file.Name, resp.Status, url)
	}
	if resp.ContentLength > limit-start {
		return false, fmt.Errorf("downloading %s: the server offers %d bytes, more than the file's %s; not downloaded (wrong URL or mirror?)", file.Name, resp.ContentLength+start, file.sizes())
	}
	if err := f.Truncate(start); err != nil {
		return false, err
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return false, err
	}
	var prog *Progress
	if opts.Progress != nil {
		total := limit
		if resp.ContentLength > 0 {
			total = start + resp.ContentLength // the form this server has
		}
		prog = NewProgress(opts.Progress, opts.TTY, file.Name, total, start)
	}
	body := &stallReader{r: resp.Body, stall: opts.Stall, cancel: cancel}
	n, err := copyBounded(f, body, limit-start, prog)
	if prog != nil {
		prog.Finish()
	}
	if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
		err = fmt.Errorf("nothing received for %s", opts.Stall)
	}
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if errors.Is(err, errTooLong) {
		f.Close()
		os.Remove(part)
		return false, fmt.Errorf("downloading %s: the server sent more than the file's %d bytes; stopped and discarded (wrong URL or mirror?)", file.Name, limit)
	}
	if err != nil {
		return false, fmt.Errorf("downloading %s cut at %s of %s (%v): run the same command again to resume", file.Name, runfile.Size(start+n), runfile.Size(limit), err)
	}
	return start > 0, nil
}

func userAgent(ua string) string {
	if ua == "" {
		return "mkbench"
	}
	return ua
}

// copyPart copies a local file into the part, bounded as a download is;
// a copy is not resumed (it is local and fast to redo).
func copyPart(ctx context.Context, file File, from, part string, opts Options) error {
	in, err := runfile.OpenRegular(from)
	if err != nil {
		return fmt.Errorf("--from %s: %w", from, pathErr(err))
	}
	defer in.Close()
	out, err := openPart(part)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := out.Truncate(0); err != nil {
		return err
	}
	var prog *Progress
	if opts.Progress != nil {
		prog = NewProgress(opts.Progress, opts.TTY, file.Name, file.maxSize(), 0)
	}
	_, err = copyBounded(out, ctxReader{ctx, in}, file.maxSize(), prog)
	if prog != nil {
		prog.Finish()
	}
	if serr := out.Sync(); err == nil {
		err = serr
	}
	if errors.Is(err, errTooLong) {
		out.Close()
		os.Remove(part)
		return fmt.Errorf("--from %s is longer than %s's %d bytes: not that file", from, file.Name, file.maxSize())
	}
	if err != nil {
		return fmt.Errorf("copying %s: %w", from, err)
	}
	return nil
}

var (
	errTooLong = errors.New("longer than expected")
	errStalled = errors.New("stalled")
)

// copyBounded copies r to w, at most limit bytes: one more is errTooLong,
// so a server cannot fill the disk.
func copyBounded(w io.Writer, r io.Reader, limit int64, prog *Progress) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		m, rerr := r.Read(buf)
		if m > 0 {
			if n+int64(m) > limit {
				return n, errTooLong
			}
			if _, err := w.Write(buf[:m]); err != nil {
				return n, err
			}
			n += int64(m)
			if prog != nil {
				prog.Add(int64(m))
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// stallReader cancels the request when a read waits longer than stall.
type stallReader struct {
	r      io.Reader
	stall  time.Duration
	cancel context.CancelCauseFunc
}

func (s *stallReader) Read(p []byte) (int, error) {
	t := time.AfterFunc(s.stall, func() { s.cancel(errStalled) })
	n, err := s.r.Read(p)
	t.Stop()
	return n, err
}

// ctxReader stops a local copy when ctx ends (Ctrl-C).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// parseContentRange reads a 206 response's "bytes FIRST-LAST/TOTAL"
// (TOTAL may be "*"; it is -1 then).
func parseContentRange(s string) (first, last, total int64, err error) {
	bad := fmt.Errorf("bad Content-Range %q", s)
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, 0, bad
	}
	span, size, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, bad
	}
	a, b, ok := strings.Cut(span, "-")
	if !ok {
		return 0, 0, 0, bad
	}
	if first, err = strconv.ParseInt(a, 10, 64); err != nil || first < 0 {
		return 0, 0, 0, bad
	}
	if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
		return 0, 0, 0, bad
	}
	total = -1
	if size != "*" {
		if total, err = strconv.ParseInt(size, 10, 64); err != nil || total <= last {
			return 0, 0, 0, bad
		}
	}
	return first, last, total, nil
}
