package main

import (
	"testing"
	"time"
)

func TestPercentile_NearestRank(t *testing.T) {
	t.Parallel()
	ten := make([]time.Duration, 10) // 1..10 ms
	for i := range ten {
		ten[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", []time.Duration{7}, 99, 7},
		{"median of ten", ten, 50, 5 * time.Millisecond},
		{"p90 of ten", ten, 90, 9 * time.Millisecond},
		{"p99 of ten is the max", ten, 99, 10 * time.Millisecond},
		{"p100 is the max", ten, 100, 10 * time.Millisecond},
		{"tiny p is the min", ten, 0.01, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}
