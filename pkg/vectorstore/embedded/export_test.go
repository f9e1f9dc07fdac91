package embedded

// BenchEnvInt lets the external benchmarks read their sizes from the
// environment as the internal ones do.
var BenchEnvInt = benchEnvInt
