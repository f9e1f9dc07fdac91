package textnorm

import "testing"

// Prose gets its capital; code keeps its case (issue 29).
func TestUpperFirst(t *testing.T) {
	for in, want := range map[string]string{
		"my deadline is Friday":                 "My deadline is Friday",
		"i moved to Berlin":                     "I moved to Berlin",
		"éclair recipes are my thing":           "Éclair recipes are my thing",
		"read_csv needs sep=';' for this file":  "read_csv needs sep=';' for this file",
		"df.groupby is slow on this table":      "df.groupby is slow on this table",
		"kubectl rollout restart -n prod fixed": "kubectl rollout restart -n prod fixed",
		"kubectl apply --dry-run first":         "kubectl apply --dry-run first",
		"`kubectl` is our deploy tool":          "`kubectl` is our deploy tool",
		"customers_q3.parquet has 12 columns":   "customers_q3.parquet has 12 columns",
		"iPhone exports are in HEIC":            "iPhone exports are in HEIC",
		"python3 is the interpreter":            "python3 is the interpreter",
		"well - that is all, -ish":              "Well - that is all, -ish",
		"":                                      "",
	} {
		if got := UpperFirst(in); got != want {
			t.Errorf("UpperFirst(%q) = %q, want %q", in, got, want)
		}
	}
}
