//go:build bench

package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// percentile is the nearest-rank percentile p (0 < p ≤ 100) of xs: the smallest sample with at
// least p% of the samples at or below it. With 20 samples P50 is the 10th and P95 the 19th.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// table renders rows of cells with aligned columns, the first row as the header.
type table struct{ rows [][]string }

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	for ri, r := range t.rows {
		for i, c := range r {
			pad := widths[i] - len([]rune(c))
			if i == 0 {
				fmt.Fprintf(&b, "| %s%s ", c, strings.Repeat(" ", pad))
			} else {
				fmt.Fprintf(&b, "| %s%s ", strings.Repeat(" ", pad), c)
			}
		}
		b.WriteString("|\n")
		if ri == 0 {
			for i := range r {
				b.WriteString("|" + strings.Repeat("-", widths[i]+2))
			}
			b.WriteString("|\n")
		}
	}
	return b.String()
}

// series is one named set of samples, in seconds or MiB.
type series struct {
	name string
	xs   []float64
}

// distRow is a table row: name, n, P50, P95, min, max, with the given format.
func distRow(s series, format string) []string {
	if len(s.xs) == 0 {
		return []string{s.name, "0", "-", "-", "-", "-"}
	}
	return []string{s.name, fmt.Sprint(len(s.xs)),
		fmt.Sprintf(format, percentile(s.xs, 50)), fmt.Sprintf(format, percentile(s.xs, 95)),
		fmt.Sprintf(format, slices.Min(s.xs)), fmt.Sprintf(format, slices.Max(s.xs))}
}
