//go:build cgo

package code_test

import (
	"context"
	"fmt"

	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/chunker/code"
)

func ExampleChunker() {
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
	chunks, err := code.New().Chunk(context.Background(), src, &chunker.Options{
		ChunkSize: 40,
		NoOverlap: true,
		Language:  "go",
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

// A program registers the tree-sitter chunker in its registry in place of the plain-text one.
func ExampleNew() {
	reg := chunker.NewRegistry()
	if err := reg.Register(chunker.Code, code.New()); err != nil {
		panic(err)
	}
	chunks, err := reg.Chunk(context.Background(), "def area(r):\n    return 3.14 * r * r\n", &chunker.Options{
		Strategy: chunker.Code,
		Language: "python",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(chunks[0].Metadata["kind"], chunks[0].Metadata["symbols"], chunks[0].Metadata[chunker.MetaParse] == "")
	// Output: function area true
}
