// Package stopword holds the English stopwords that Loom's keyword analyzer (retriever.AppendTerms) and
// its offline lexical embedder (embed.Lexical) leave out: one list, so that the two agree on what is too
// common to say anything about a text.
package stopword

// English is Lucene's classic English stop set, lowercase.
var English = []string{
	"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
	"no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they",
	"this", "to", "was", "will", "with",
}

// IsEnglish reports whether w, a lowercase word, is in English.
func IsEnglish(w string) bool {
	switch w {
	case "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
		"no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they",
		"this", "to", "was", "will", "with":
		return true
	}
	return false
}
