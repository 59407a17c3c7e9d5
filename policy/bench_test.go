package policy

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// The benchmarks report, beside ns/op, the ratio of classifying a command to
// parsing it alone with mvdan.cc/sh (x-parse), measured in the same run, so
// the figures compare across machines.

func BenchmarkTypical(b *testing.B) {
	for _, cmd := range []string{
		"git status --short",
		"go test ./... 2>&1 | tail -20",
		`grep -rn "TODO" src/ | head -50`,
		"npm run build && git add -A && git commit -m 'build: update'",
	} {
		b.Run(cmd, func(b *testing.B) { benchRatio(b, []string{cmd}) })
	}
}

func BenchmarkCorpus(b *testing.B) {
	var cmds []string
	for _, c := range readCorpus(b, "corpus-public.jsonl") {
		cmds = append(cmds, c.Cmd)
	}
	b.Run("public", func(b *testing.B) { benchRatio(b, cmds) })
	cmds = cmds[:0]
	for _, c := range readCorpus(b, "cases.jsonl") {
		cmds = append(cmds, c.Cmd)
	}
	b.Run("cases", func(b *testing.B) { benchRatio(b, cmds) })
}

// BenchmarkLargeInputs measures the hardest 64 KB inputs; the goal is under
// 10 ms each.
func BenchmarkLargeInputs(b *testing.B) {
	ins := largeInputs(rand.New(rand.NewPCG(3, 4)), 64<<10)
	for i, in := range ins {
		name := strings.Map(func(r rune) rune {
			if r < 'a' || r > 'z' {
				return '_'
			}
			return r
		}, in[:min(12, len(in))])
		b.Run(name+"-"+string(rune('a'+i%26)), func(b *testing.B) { benchRatio(b, []string{in}) })
	}
}

// benchRatio classifies cmds b.N times, timing parse-only and classify
// separately, and reports ns per command of each and their ratio.
func benchRatio(b *testing.B, cmds []string) {
	b.ReportAllocs()
	var parseT, classT time.Duration
	for i := 0; i < b.N; i++ {
		for _, c := range cmds {
			t0 := time.Now()
			parse(c) //nolint:errcheck // a baseline: errors are part of the work
			t1 := time.Now()
			Classify(c)
			parseT += t1.Sub(t0)
			classT += time.Since(t1)
		}
	}
	n := float64(b.N * len(cmds))
	b.ReportMetric(float64(parseT.Nanoseconds())/n, "parse-ns/cmd")
	b.ReportMetric(float64(classT.Nanoseconds())/n, "classify-ns/cmd")
	if parseT > 0 {
		b.ReportMetric(float64(classT)/float64(parseT), "x-parse")
	}
}
