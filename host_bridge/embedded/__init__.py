"""The embedded reference host: a real, usable host for demos, the CLI, tests and benchmarks."""
