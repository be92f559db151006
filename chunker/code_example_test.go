package chunker_test

import (
	"context"
	"fmt"

	"github.com/context-loom/loom/chunker"
)

func ExampleCodeChunker() {
	src := `package shapes

import "math"

// Circle is a round shape.
type Circle struct{ R float64 }

// Area returns the circle's area.
func (c Circle) Area() float64 {
	return math.Pi * c.R * c.R
}

// Perimeter returns the length around the circle.
func (c Circle) Perimeter() float64 {
	return 2 * math.Pi * c.R
}

func main() {
	c := Circle{R: 2}
	println(c.Area(), c.Perimeter())
}
`
	chunks, err := chunker.NewCode().Chunk(context.Background(), src, &chunker.Options{
		ChunkSize: 40,
		NoOverlap: true,
		Language:  chunker.LanguageForFile("shapes.go"),
	})
	if err != nil {
		panic(err)
	}
	for _, ch := range chunks {
		md := ch.Metadata
		fmt.Printf("lines %s-%s %s: %s\n", md["start_line"], md["end_line"], md["kind"], md["symbols"])
	}
	// Output:
	// lines 1-6 mixed: Circle
	// lines 8-11 method: Circle.Area
	// lines 13-16 method: Circle.Perimeter
	// lines 18-21 function: main
}
