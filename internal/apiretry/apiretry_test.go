package apiretry

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header map[string]string
		want   time.Duration
	}{
		{nil, -1},
		{map[string]string{"Retry-After": "0"}, 0},
		{map[string]string{"Retry-After": "2"}, 2 * time.Second},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{map[string]string{"Retry-After": "3600"}, time.Minute},
		{map[string]string{"Retry-After": "-1"}, -1},
		{map[string]string{"Retry-After": "soon"}, -1},
		{map[string]string{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0}, // in the past
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{map[string]string{"Retry-After-Ms": "x", "Retry-After": "9"}, 9 * time.Second},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		if got := RetryAfter(h); got != tt.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tt.header, got, tt.want)
		}
	}
}
