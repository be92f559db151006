package embed

import (
	"fmt"
	"math"
	"testing"
)

func TestCosine(t *testing.T) {
	t.Parallel()
	nan := float32(math.NaN())
	tests := []struct {
		name string
		a, b []float32
		want float32
	}{
		{"identical", []float32{1, 2, 3}, []float32{1, 2, 3}, 1},
		{"scaled is identical", []float32{1, 2, 3}, []float32{10, 20, 30}, 1},
		{"opposite", []float32{1, -2}, []float32{-1, 2}, -1},
		{"orthogonal", []float32{1, 0}, []float32{0, 1}, 0},
		{"zero vector is 0", []float32{0, 0}, []float32{1, 0}, 0},
		{"both zero is 0", []float32{0, 0}, []float32{0, 0}, 0},
		{"different lengths are 0", []float32{1, 0}, []float32{1, 0, 0}, 0},
		{"empty is 0", nil, nil, 0},
		{"45 degrees", []float32{1, 0}, []float32{1, 1}, float32(1 / math.Sqrt2)},
		{"NaN stays NaN", []float32{nan, 1}, []float32{1, 1}, nan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Cosine(tt.a, tt.b)
			if math.IsNaN(float64(tt.want)) {
				if !math.IsNaN(float64(got)) {
					t.Fatalf("Cosine = %v, want NaN", got)
				}
				return
			}
			if math.Abs(float64(got-tt.want)) > 1e-6 {
				t.Fatalf("Cosine = %v, want %v", got, tt.want)
			}
			if back := Cosine(tt.b, tt.a); back != got {
				t.Fatalf("Cosine is not symmetric: %v and %v", got, back)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	inf := float32(math.Inf(1))
	tests := []struct {
		name string
		in   []float32
		want []float32
	}{
		{"scales to unit length", []float32{3, 4}, []float32{0.6, 0.8}},
		{"unit vector unchanged", []float32{0, -1, 0}, []float32{0, -1, 0}},
		{"tiny values", []float32{1e-30, 1e-30}, []float32{float32(1 / math.Sqrt2), float32(1 / math.Sqrt2)}},
		{"huge values", []float32{3e38, 3e38}, []float32{float32(1 / math.Sqrt2), float32(1 / math.Sqrt2)}},
		{"zero vector unchanged", []float32{0, 0, 0}, []float32{0, 0, 0}},
		{"infinity unchanged", []float32{inf, 1}, []float32{inf, 1}},
		{"empty", []float32{}, []float32{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := append([]float32(nil), tt.in...)
			Normalize(v)
			for i := range v {
				if math.Abs(float64(v[i]-tt.want[i])) > 1e-6 && v[i] != tt.want[i] {
					t.Fatalf("Normalize(%v) = %v, want %v", tt.in, v, tt.want)
				}
			}
		})
	}
}

func ExampleCosine() {
	a := []float32{1, 0, 1}
	b := []float32{1, 1, 0}
	fmt.Printf("%.2f\n", Cosine(a, b))
	fmt.Printf("%.2f\n", Cosine(a, a))
	fmt.Printf("%.2f\n", Cosine(a, []float32{0, 0, 0}))
	// Output:
	// 0.50
	// 1.00
	// 0.00
}

func ExampleNormalize() {
	v := []float32{3, 4}
	Normalize(v)
	fmt.Println(v)
	// Output:
	// [0.6 0.8]
}

type unweighted struct{ Embedder }

type badWeight struct{ Embedder }

func (badWeight) FusionWeight() float64 { return math.NaN() }

func TestFusionWeight(t *testing.T) {
	t.Parallel()
	o, err := NewOpenAI(OpenAIConfig{BaseURL: "http://localhost:1/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	o2, err := NewOpenAI(OpenAIConfig{BaseURL: "http://localhost:1/v1", Model: "m", FusionWeight: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		emb  Embedder
		want float64
	}{
		{"lexical", Default(), LexicalFusionWeight},
		{"openai", o, DefaultOpenAIFusionWeight},
		{"openai configured", o2, 2.5},
		{"one that does not say", unweighted{Default()}, DefaultFusionWeight},
		{"one that says NaN", badWeight{Default()}, DefaultFusionWeight},
	} {
		if got := FusionWeight(tc.emb); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
