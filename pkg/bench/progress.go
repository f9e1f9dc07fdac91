package bench

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progress shows a long phase's advance: one line rewritten in place on a
// terminal, or a line every few seconds otherwise (a log file or CI output should
// not fill up with carriage returns).
type progress struct {
	w     io.Writer
	tty   bool
	what  string
	total int
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, what string, total int) *progress {
	now := time.Now()
	return &progress{w: w, tty: isTerminal(w), what: what, total: total, start: now, last: now}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// update reports done of total, at most every 100 ms on a terminal and every 5 s
// elsewhere.
func (p *progress) update(done int) {
	every := 5 * time.Second
	if p.tty {
		every = 100 * time.Millisecond
	}
	if time.Since(p.last) < every {
		return
	}
	p.last = time.Now()
	p.line(fmt.Sprintf("%s %d/%d%s", p.what, done, p.total, p.rateETA(done)), !p.tty)
}

// finish reports the end of the phase on a line of its own.
func (p *progress) finish(done int) {
	p.line(fmt.Sprintf("%s %d/%d in %.1fs", p.what, done, p.total, time.Since(p.start).Seconds()), true)
}

// line writes text over the current terminal line (\r, then erase to its end
// whatever a longer earlier line left), or as a plain line elsewhere.
func (p *progress) line(text string, newline bool) {
	text = "   " + text
	if p.tty {
		text = "\r" + text + "\x1b[K"
	}
	if newline {
		text += "\n"
	}
	fmt.Fprint(p.w, text)
}

func (p *progress) rateETA(done int) string {
	elapsed := time.Since(p.start).Seconds()
	if done == 0 || elapsed == 0 {
		return ""
	}
	rate := float64(done) / elapsed
	eta := time.Duration(float64(p.total-done) / rate * float64(time.Second)).Round(time.Second)
	return fmt.Sprintf("  %.0f/s  ETA %s", rate, eta)
}
